package numeric

import (
	"fmt"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/vec"
)

// Accumulator is an element type reductions accumulate in: float32 (for
// float32, float16 and bfloat16), float64 and int32.
type Accumulator interface {
	float32 | float64 | int32
}

// Accumulate sets acc[i] = op(acc[i], x[i]) for i < len(acc); x must be at
// least as long. Sums wrap around for int32. Max and min ignore a NaN operand
// unless both are NaN (IEEE 754 maxNum/minNum, CUDA's fmaxf/fminf); of
// two zeros, max picks +0 and min -0.
//
//go:norace
//go:nocheckptr
func Accumulate[T Accumulator](op backend.ReduceOp, acc, x []T) {
	x = x[:len(acc)]
	var zero T
	if _, ok := any(zero).(float32); ok {
		k := accumulateVec(op, view32(acc), view32(x))
		acc, x = acc[k:], x[k:]
	}
	switch op {
	case backend.Sum:
		for i, v := range x {
			acc[i] += v
		}
	case backend.Max:
		for i, v := range x {
			acc[i] = maxNum(acc[i], v)
		}
	case backend.Min:
		for i, v := range x {
			acc[i] = minNum(acc[i], v)
		}
	default:
		panic(fmt.Sprintf("numeric: invalid %v", op))
	}
}

// AccumulateHalf sets acc[i] = op(acc[i], widen(x[i])) for i < len(acc),
// where x holds float16 (d == Float16) or bfloat16 (d == BFloat16) bit
// patterns and widen is the exact conversion to float32. It widens a block
// at a time into scratch that Accumulate then reduces (both vector loops
// where the machine has them); without them, bfloat16 widens and reduces
// in one Go loop (its widening is a shift). The choice of type and op is
// made once per block, not per element; the sum's vector loop widens and
// adds in one pass. x must be at least as long as acc.
//
//go:norace
//go:nocheckptr
func AccumulateHalf(d backend.DType, op backend.ReduceOp, acc []float32, x []uint16) {
	x = x[:len(acc)]
	if op == backend.Sum {
		// The sum's vector loop widens and adds in one pass.
		var k int
		if d == backend.Float16 {
			k = vec.AccF16(acc, x)
		} else if d == backend.BFloat16 {
			k = vec.AccBF16(acc, x)
		}
		acc, x = acc[k:], x[k:]
	}
	switch {
	case d != backend.Float16 && d != backend.BFloat16:
		panic(fmt.Sprintf("numeric: AccumulateHalf of %v", d))
	case d == backend.Float16 || vec.Available():
		var tmp [512]float32
		for lo := 0; lo < len(acc); lo += len(tmp) {
			hi := min(lo+len(tmp), len(acc))
			if d == backend.Float16 {
				F16sToF32s(tmp[:], x[lo:hi])
			} else {
				BF16sToF32s(tmp[:], x[lo:hi])
			}
			Accumulate(op, acc[lo:hi], tmp[:])
		}
	case op == backend.Sum:
		for i, v := range x {
			acc[i] += BF16ToF32(v)
		}
	case op == backend.Max:
		for i, v := range x {
			acc[i] = maxNum(acc[i], BF16ToF32(v))
		}
	case op == backend.Min:
		for i, v := range x {
			acc[i] = minNum(acc[i], BF16ToF32(v))
		}
	default:
		panic(fmt.Sprintf("numeric: invalid %v", op))
	}
}

// SumHalfPair sets dst[i] to the sum of a[i] and b[i], float16 (d ==
// Float16) or bfloat16 (d == BFloat16) bit patterns, widened exactly,
// added in float32 and rounded once to nearest even: the bits AccumulateHalf
// and the narrowing give, in one pass where the machine has the vector
// loop. a and b must be at least as long as dst; dst may be a or b.
//
//go:norace
//go:nocheckptr
func SumHalfPair(d backend.DType, dst, a, b []uint16) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch d {
	case backend.Float16:
		k := vec.SumF16(dst, a, b)
		for i := k; i < len(dst); i++ {
			dst[i] = F32ToF16(F16ToF32(a[i]) + F16ToF32(b[i]))
		}
	case backend.BFloat16:
		k := vec.SumBF16(dst, a, b)
		for i := k; i < len(dst); i++ {
			dst[i] = F32ToBF16(BF16ToF32(a[i]) + BF16ToF32(b[i]))
		}
	default:
		panic(fmt.Sprintf("numeric: SumHalfPair of %v", d))
	}
}

// accumulateVec runs the vector loop of op over a prefix of acc and
// returns its length (0 for an op it has no loop for).
func accumulateVec(op backend.ReduceOp, acc, x []float32) int {
	switch op {
	case backend.Sum:
		return vec.AddF32(acc, x)
	case backend.Max:
		return vec.MaxF32(acc, x)
	case backend.Min:
		return vec.MinF32(acc, x)
	}
	return 0
}

// view32 views a slice of float32 accumulators (T is float32) as []float32.
func view32[T Accumulator](s []T) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// maxNum is IEEE 754 maxNum: the larger of a and b, the one that is not NaN
// if only one is. The builtin is branch-free but propagates NaN, so the
// rare NaN is fixed up after (m != m is false for integers).
func maxNum[T Accumulator](a, b T) T {
	if m := max(a, b); m == m {
		return m
	}
	return notNaN(a, b)
}

// minNum is maxNum's counterpart for the smaller value.
func minNum[T Accumulator](a, b T) T {
	if m := min(a, b); m == m {
		return m
	}
	return notNaN(a, b)
}

// notNaN returns whichever of a and b is not NaN (b when both are).
func notNaN[T Accumulator](a, b T) T {
	if a != a {
		return b
	}
	return a
}

// Combine returns op(acc, x) with the semantics of Accumulate, in float64.
// Callers reducing narrower types round the result themselves.
//
//go:norace
func Combine(op backend.ReduceOp, acc, x float64) float64 {
	switch op {
	case backend.Sum:
		return acc + x
	case backend.Max:
		return maxNum(acc, x)
	case backend.Min:
		return minNum(acc, x)
	}
	panic(fmt.Sprintf("numeric: invalid %v", op))
}
