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
// unless both are NaN (IEEE 754 maxNum/minNum, CUDA's fmaxf/fminf).
func Accumulate[T Accumulator](op backend.ReduceOp, acc, x []T) {
	x = x[:len(acc)]
	switch op {
	case backend.Sum:
		for i, v := range x {
			acc[i] += v
		}
	case backend.Max:
		for i, v := range x {
			if a := acc[i]; v > a || a != a {
				acc[i] = v
			}
		}
	case backend.Min:
		for i, v := range x {
			if a := acc[i]; v < a || a != a {
				acc[i] = v
			}
		}
	default:
		panic(fmt.Sprintf("numeric: invalid %v", op))
	}
}

// Combine returns op(acc, x) with the semantics of Accumulate, in float64.
// Callers reducing narrower types round the result themselves.
func Combine(op backend.ReduceOp, acc, x float64) float64 {
	switch op {
	case backend.Sum:
		return acc + x
	case backend.Max:
		if x > acc || acc != acc {
			return x
		}
		return acc
	case backend.Min:
		if x < acc || acc != acc {
			return x
		}
		return acc
	}
	panic(fmt.Sprintf("numeric: invalid %v", op))
}
