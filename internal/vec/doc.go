// Package vec holds vector loops (AVX2 on amd64) for the fake backend's
// hot paths: internal/numeric's slice conversions between float32 and the
// two 16-bit float formats and its float32 reductions, and kernels/cpu's
// LL line encoding.
//
// Each function runs its loop over the longest prefix of its slices that
// the loop takes (a multiple of its block) and returns that prefix's
// length; the caller's Go loop does the rest. Where the build or the
// machine has no vector loops (another architecture, a CPU without AVX2
// and F16C, or the purego build tag) every function returns 0 and the Go
// loops do everything. The Go loops are the reference: the callers'
// tests hold the vector loops to them bit for bit.
//
// The loops are assembly, built by the Go toolchain (no cgo). They are
// invisible to the race detector: callers whose slices other goroutines
// touch report them (internal/race).
package vec
