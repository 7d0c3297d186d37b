// Package numeric converts and accesses the elements of every
// backend.DType, for the fake backend's kernels and for tests.
//
// It has three parts:
//
//   - conversions between float32/float64 and the two 16-bit formats,
//     IEEE 754 binary16 (float16) and bfloat16, rounding to nearest even and
//     carrying NaN, infinities and subnormals through (F32ToF16, BF16ToF32…),
//     plus slice forms of them for hot loops (vector loops from
//     internal/vec where the machine has them, Go loops for the rest);
//   - element access on little-endian byte buffers (Get, Put, Fill) and
//     typed views of aligned buffers (Float32s, Uint16s…) that kernels use
//     to reduce large buffers without a per-element decode;
//   - reduction semantics shared by kernels and tests (Combine, Accumulate)
//     and test data (Pattern, Expected) whose reductions over up to
//     kernels.MaxRanks ranks are exact in every element type, so results can
//     be compared bit for bit.
//
// Max and min follow IEEE 754 maxNum/minNum, as CUDA's fmaxf/fminf do: a NaN
// operand is ignored unless both are NaN.
//
// Accumulate and AccumulateHalf run internal/vec's float32 loops for sum,
// max and min where the machine has them. The scalar functions are the
// reference: the tests hold every slice form to them bit for bit (all
// 2^32 float32 patterns narrowed both ways agreed on 2026-11-26).
//
// The conversions and Accumulate are compiled without the race detector's
// per-element instrumentation (//go:norace, //go:nocheckptr), so under
// -race they run about as fast as the memory they touch allows, and they
// report nothing to the detector themselves: a caller whose slices other
// goroutines touch reports them whole (internal/race), as kernels/cpu's
// reduction does for its sources and destination, once per call rather
// than for every chunk of its own scratch. Encode reports the slices it
// is given.
package numeric
