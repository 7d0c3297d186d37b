// Package race reports memory accesses to the race detector in bulk.
//
// Loops that convert or reduce elements one at a time (internal/numeric)
// are marked //go:norace and //go:nocheckptr: under -race every element
// would otherwise cost a call into the detector for each load and store,
// plus a pointer check for each bit-pattern conversion (math.Float32frombits
// is an unsafe conversion once inlined), which made such loops about ten
// times slower than the memory they touch warrants. Those loops report
// their slices whole through Read and Write instead, so the detector still
// sees every byte they touch, as one range per call. In builds without
// -race both are empty and inline away.
package race
