package numeric

import (
	"bytes"
	"fmt"
	"math"

	"github.com/intranode/intranode/backend"
)

// PatternRange bounds the values of PatternValue: every value v has
// |v| <= PatternRange. Eight of them sum to at most 128 in magnitude, an
// integer every element type (bfloat16, with 8 significant bits, included)
// represents exactly, so reductions of patterns are exact whatever the
// order or the accumulation type.
const PatternRange = 16

// PatternValue is the test value of element i on rank, for a given seed: an
// integer in [-PatternRange, PatternRange] that varies with all three so
// that misplaced elements, swapped ranks and stale data from an earlier seed
// show up.
//
//go:norace
func PatternValue(rank, seed, i int) float64 {
	h := uint64(i)*0x9e3779b97f4a7c15 ^ uint64(rank+1)*0xbf58476d1ce4e5b9 ^ uint64(seed)*0x94d049bb133111eb
	h ^= h >> 31
	h *= 0xd6e8feb86659fd93
	h ^= h >> 32
	return float64(int(h%(2*PatternRange+1)) - PatternRange)
}

// Pattern writes PatternValue(rank, seed, i) into elements [0, count) of b.
func Pattern(d backend.DType, b []byte, count, rank, seed int) {
	EncodeValues(d, b, count, patternValues{rank, seed})
}

// patternValues are one rank's PatternValue for one seed.
type patternValues struct{ rank, seed int }

//go:norace
func (p patternValues) Value(i int) float64 { return PatternValue(p.rank, p.seed, i) }

// ExpectedValue is op over ranks 0..world-1 of PatternValue(r, seed, i):
// the exact result of an all-reduce of Pattern inputs of type d. For Avg
// it is the exact sum divided by world: for Int32 truncated toward zero,
// for the floating types the quotient that Put rounds once (the kernels'
// quotient, divided in float32 or float64 and rounded, is the same value,
// since the quotient of a small integer by 3, 5, 6 or 7 never falls on a
// rounding boundary).
//
//go:norace
func ExpectedValue(d backend.DType, op backend.ReduceOp, world, seed, i int) float64 {
	fold := op.Reduced()
	acc := PatternValue(0, seed, i)
	for r := 1; r < world; r++ {
		acc = Combine(fold, acc, PatternValue(r, seed, i))
	}
	return Finish(d, op, world, acc)
}

// VendorAvgExact reports whether a vendor library's average over world
// ranks is exact on Pattern inputs, as ExpectedValue's is: NCCL's ncclAvg
// multiplies each input by 1/world rounded to the element type, which is
// exact only where world is a power of two; elsewhere its result is within
// rounding of the quotient, not equal to it.
func VendorAvgExact(world int) bool { return world > 0 && world&(world-1) == 0 }

// VendorAvgBound is how far from the exact quotient a vendor library's
// average of world values of type d may lie where VendorAvgExact(world) is
// false; abs is the sum of the values' magnitudes. NCCL's ncclAvg on a
// floating type multiplies each value by 1/world rounded to d and adds the
// products in d, each step rounded, in an order of its own: the scalar
// and each product are off by at most the unit roundoff u of d
// relatively, a sum of world terms by (world-1)·u of their magnitudes, so
// (world+2)·u·abs/world bounds the whole. Int32 is averaged exactly (a
// sum, then a division toward zero), so its bound is 0.
func VendorAvgBound(d backend.DType, world int, abs float64) float64 {
	var bits int // significand bits, the implicit one included
	switch d {
	case backend.BFloat16:
		bits = 8
	case backend.Float16:
		bits = 11
	case backend.Float32:
		bits = 24
	case backend.Float64:
		bits = 53
	default:
		return 0
	}
	return float64(world+2) * math.Ldexp(abs/float64(world), -bits)
}

// Finish completes a reduction of world values of type d folded with
// op.Reduced(): for Avg it divides by world (for Int32 toward zero, as
// C and the kernels do); for any other op it returns v.
func Finish(d backend.DType, op backend.ReduceOp, world int, v float64) float64 {
	if op != backend.Avg {
		return v
	}
	v /= float64(world)
	if d == backend.Int32 {
		v = math.Trunc(v)
	}
	return v
}

// Expected writes ExpectedValue(d, op, world, seed, i) into elements
// [0, count) of b. world must be at most 8 for the values to be exact in
// every type (see PatternRange).
func Expected(d backend.DType, op backend.ReduceOp, b []byte, count, world, seed int) {
	EncodeValues(d, b, count, expectedValues{d, op, world, seed})
}

// expectedValues are ExpectedValue for one dtype, op, world and seed.
type expectedValues struct {
	d           backend.DType
	op          backend.ReduceOp
	world, seed int
}

//go:norace
func (e expectedValues) Value(i int) float64 { return ExpectedValue(e.d, e.op, e.world, e.seed, i) }

// Mismatch describes the first element where two buffers differ.
type Mismatch struct {
	Index     int
	Got, Want float64
}

// Error formats the mismatch.
func (m Mismatch) Error() string {
	return fmt.Sprintf("element %d: got %v, want %v", m.Index, m.Got, m.Want)
}

// Compare compares elements [0, count) of got and want bit for bit and
// returns how many differ and the first that does (nil when none do).
func Compare(d backend.DType, got, want []byte, count int) (wrong int, first *Mismatch) {
	size := d.Size()
	if bytes.Equal(got[:count*size], want[:count*size]) {
		return 0, nil
	}
	for i := range count {
		g, w := got[i*size:(i+1)*size], want[i*size:(i+1)*size]
		if string(g) == string(w) {
			continue
		}
		if first == nil {
			first = &Mismatch{Index: i, Got: Get(d, got, i), Want: Get(d, want, i)}
		}
		wrong++
	}
	return wrong, first
}

// CompareWithin is Compare where element i counts as wrong only when it
// lies further than bound(i) from want's (a NaN is always wrong).
func CompareWithin(d backend.DType, got, want []byte, count int, bound func(i int) float64) (wrong int, first *Mismatch) {
	for i := range count {
		g, w := Get(d, got, i), Get(d, want, i)
		if math.Abs(g-w) <= bound(i) {
			continue
		}
		if first == nil {
			first = &Mismatch{Index: i, Got: g, Want: w}
		}
		wrong++
	}
	return wrong, first
}
