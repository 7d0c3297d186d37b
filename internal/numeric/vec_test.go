package numeric

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/vec"
)

// The slice conversions and Accumulate run vector loops where the machine
// has them (internal/vec) and Go loops for the rest; these tests hold the
// slice forms, over lengths the vector loops take, to the scalar functions
// bit for bit.

func TestSIMDAvailability(t *testing.T) {
	t.Logf("vector loops in this build and on this machine: %v", vec.Available())
}

// TestSliceWidenExhaustive widens all 65536 bit patterns of both formats
// (plus a tail the Go loop takes) and compares with the scalar widening.
func TestSliceWidenExhaustive(t *testing.T) {
	src := make([]uint16, 1<<16+7)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]float32, len(src))
	for _, f := range formats {
		if f.name == "float16" {
			F16sToF32s(dst, src)
		} else {
			BF16sToF32s(dst, src)
		}
		for i, h := range src {
			if got, want := math.Float32bits(dst[i]), math.Float32bits(f.toF32(h)); got != want {
				require.Failf(t, "widen", "%s %#04x: %#08x, scalar %#08x", f.name, h, got, want)
			}
		}
	}
}

// narrowInputs is float32 bit patterns for the narrowing tests: every
// top half with low halves at and around both formats' rounding points
// (bit 15 for bfloat16, bit 12 and the subnormal shifts for float16), then
// random patterns.
func narrowInputs() []float32 {
	lows := []uint32{0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff, 0x5555, 0xaaaa, 0x6000}
	var in []float32
	for hi := range uint32(1 << 16) {
		for _, lo := range lows {
			in = append(in, math.Float32frombits(hi<<16|lo))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		in = append(in, math.Float32frombits(rng.Uint32()))
	}
	return append(in, 1, 2, 3) // a tail for the Go loop
}

func TestSliceNarrow(t *testing.T) {
	src := narrowInputs()
	dst := make([]uint16, len(src))
	for _, f := range formats {
		if f.name == "float16" {
			F32sToF16s(dst, src)
		} else {
			F32sToBF16s(dst, src)
		}
		for i, v := range src {
			if want := f.fromF32(v); dst[i] != want {
				require.Failf(t, "narrow", "%s of %#08x: %#04x, scalar %#04x", f.name, math.Float32bits(v), dst[i], want)
			}
		}
	}
}

// TestAccumulateFloat32Pairs reduces every pair of special and ordinary
// values (zeros of both signs, infinities, NaNs with payloads, subnormals)
// in both orders with each op and compares with the scalar semantics:
// bit for bit for max and min, which return one operand; for sum, a NaN
// result need only be NaN (which NaN's payload an addition keeps is the
// hardware's choice).
func TestAccumulateFloat32Pairs(t *testing.T) {
	specials := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2.5, -3,
		float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00001), math.Float32frombits(0x7fa00000),
		math.Float32frombits(1), math.Float32frombits(0x80000003), math.MaxFloat32, -math.MaxFloat32, 1e-30}
	var a, x []float32
	for _, p := range specials {
		for _, q := range specials {
			a, x = append(a, p), append(x, q)
		}
	}
	a, x = append(a, 7), append(x, 8) // a tail for the Go loop
	for _, op := range []backend.ReduceOp{backend.Sum, backend.Max, backend.Min} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			acc := append([]float32(nil), a...)
			Accumulate(op, acc, x)
			for i := range acc {
				var want float32
				switch op {
				case backend.Sum:
					want = a[i] + x[i]
				case backend.Max:
					want = maxNum(a[i], x[i])
				case backend.Min:
					want = minNum(a[i], x[i])
				}
				if op == backend.Sum && want != want {
					require.True(t, acc[i] != acc[i], "%v + %v = %v, want NaN", a[i], x[i], acc[i])
					continue
				}
				require.Equal(t, math.Float32bits(want), math.Float32bits(acc[i]),
					"%v(%#08x, %#08x)", op, math.Float32bits(a[i]), math.Float32bits(x[i]))
			}
		})
	}
}

// TestAccumulateHalfMatchesScalar reduces random 16-bit patterns of both
// formats into random accumulators and compares with widening each
// element and reducing it alone.
func TestAccumulateHalfMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 3000
	x := make([]uint16, n)
	a := make([]float32, n)
	for i := range x {
		x[i] = uint16(rng.Uint32())
		a[i] = math.Float32frombits(rng.Uint32())
	}
	for _, f := range formats {
		d := backend.Float16
		if f.name == "bfloat16" {
			d = backend.BFloat16
		}
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Max, backend.Min} {
			acc := append([]float32(nil), a...)
			AccumulateHalf(d, op, acc, x)
			for i := range acc {
				v := f.toF32(x[i])
				want := a[i] + v
				switch op {
				case backend.Max:
					want = maxNum(a[i], v)
				case backend.Min:
					want = minNum(a[i], v)
				}
				if op == backend.Sum && want != want {
					require.True(t, acc[i] != acc[i], "%s %v: element %d", f.name, op, i)
					continue
				}
				require.Equal(t, math.Float32bits(want), math.Float32bits(acc[i]), "%s %v: element %d", f.name, op, i)
			}
		}
	}
}

// TestSumHalfPairMatchesScalar adds pairs of 16-bit patterns of both
// formats — random ones, every pattern against a few fixed partners (zeros,
// ones, infinities, the largest finite, a NaN), and in place — and compares
// with widening, adding and narrowing each element alone. Where the float32
// sum is NaN only NaN-ness is held: which operand's payload x86 keeps is
// not part of the contract.
func TestSumHalfPairMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var a, b []uint16
	for range 3001 {
		a, b = append(a, uint16(rng.Uint32())), append(b, uint16(rng.Uint32()))
	}
	for _, partner := range []uint16{0x0000, 0x8000, 0x3c00, 0x3f80, 0x7c00, 0x7f80, 0xfc00, 0xff80, 0x7bff, 0x7f7f, 0x7e00, 0x7fc1} {
		for h := range 1 << 16 {
			a, b = append(a, uint16(h)), append(b, partner)
		}
	}
	for _, f := range formats {
		d := backend.Float16
		if f.name == "bfloat16" {
			d = backend.BFloat16
		}
		check := func(got []uint16) {
			t.Helper()
			for i := range got {
				s := f.toF32(a[i]) + f.toF32(b[i])
				if s != s {
					if w := f.toF32(got[i]); w == w {
						require.Failf(t, "sum", "%s %#04x + %#04x = %#04x, want a NaN", f.name, a[i], b[i], got[i])
					}
					continue
				}
				if want := f.fromF32(s); got[i] != want {
					require.Failf(t, "sum", "%s %#04x + %#04x = %#04x, scalar %#04x", f.name, a[i], b[i], got[i], want)
				}
			}
		}
		dst := make([]uint16, len(a))
		SumHalfPair(d, dst, a, b)
		check(dst)
		inPlace := append([]uint16(nil), a...)
		SumHalfPair(d, inPlace, inPlace, b)
		check(inPlace)
	}
}

// BenchmarkSumHalfPair measures the two-source half-precision sum the
// fake's two-rank reductions use, bfloat16 and float16, with 8 Ki elements
// (in the cache) and 1 Mi (not): GB/s of output.
func BenchmarkSumHalfPair(b *testing.B) {
	for _, d := range []backend.DType{backend.BFloat16, backend.Float16} {
		for _, n := range []int{8 << 10, 1 << 20} {
			a, c, dst := make([]uint16, n), make([]uint16, n), make([]uint16, n)
			for i := range a {
				a[i], c[i] = uint16(0x3f80+i%64), uint16(0x4000+i%32)
			}
			b.Run(fmt.Sprintf("%v/elems=%d", d, n), func(b *testing.B) {
				b.SetBytes(int64(2 * n))
				for b.Loop() {
					SumHalfPair(d, dst, a, c)
				}
			})
		}
	}
}
