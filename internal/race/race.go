// Package race reports memory accesses to the race detector in bulk, and
// says whether the program is built with -race (Enabled).
//
// Loops that convert or reduce elements one at a time (internal/numeric)
// are marked //go:norace and //go:nocheckptr: under -race every element
// would otherwise cost a call into the detector for each load and store,
// plus a pointer check for each bit-pattern conversion (math.Float32frombits
// is an unsafe conversion once inlined), which made such loops about ten
// times slower than the memory they touch warrants. Their callers report
// the shared slices those loops touch whole through Read and Write (the
// fake's reduction in kernels/cpu: its sources and destination, once per
// call), so the detector still sees every shared byte, as one range per
// call. In builds without -race both are empty and inline away.
package race
