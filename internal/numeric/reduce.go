package numeric

import (
	"fmt"

	"github.com/intranode/intranode/backend"
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
func Accumulate[T Accumulator](op backend.ReduceOp, acc, x []T) {
	x = x[:len(acc)]
	switch op {
	case backend.Sum:
		for i, v := range x {
			acc[i] += v
		}
	case backend.Max:
		// The builtin is branch-free but propagates NaN; the rare NaN is
		// fixed up after (x != x is false for integers).
		for i, v := range x {
			a := acc[i]
			m := max(a, v)
			if m != m {
				m = notNaN(a, v)
			}
			acc[i] = m
		}
	case backend.Min:
		for i, v := range x {
			a := acc[i]
			m := min(a, v)
			if m != m {
				m = notNaN(a, v)
			}
			acc[i] = m
		}
	default:
		panic(fmt.Sprintf("numeric: invalid %v", op))
	}
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
func Combine(op backend.ReduceOp, acc, x float64) float64 {
	switch op {
	case backend.Sum:
		return acc + x
	case backend.Max:
		if m := max(acc, x); m == m {
			return m
		}
		return notNaN(acc, x)
	case backend.Min:
		if m := min(acc, x); m == m {
			return m
		}
		return notNaN(acc, x)
	}
	panic(fmt.Sprintf("numeric: invalid %v", op))
}
