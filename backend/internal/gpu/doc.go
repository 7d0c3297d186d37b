// Package gpu is the part of the CUDA and ROCm backends that is the same
// program for both: the backend's device table and peer checks, opened
// devices, plain and host-mapped memory, streams, events, graphs, modules
// and kernel launches, and the bookkeeping that lets Device.Close release
// and report what the caller left open.
//
// A vendor backend fills two small interfaces and keeps only what really
// differs between vendors: Runtime is the driver API (one call per
// operation, with the device's context made current inside it), and
// Vendor adds how devices open, how peers are checked and how shareable
// memory is made, exported and imported (CUDA: driver VMM with file
// descriptors or fabric handles; HIP: uncached VMM memory or IPC handles).
// The package is pure Go and builds without tags, so its tests run with a
// runtime written in Go.
package gpu
