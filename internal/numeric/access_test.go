package numeric

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func TestGetPut(t *testing.T) {
	tests := []struct {
		d     backend.DType
		in    float64
		want  float64
		bytes []byte
	}{
		{backend.Float32, 1.5, 1.5, []byte{0, 0, 0xc0, 0x3f}},
		{backend.Float32, 0.1, float64(float32(0.1)), []byte{0xcd, 0xcc, 0xcc, 0x3d}},
		{backend.Float16, -2, -2, []byte{0x00, 0xc0}},
		{backend.Float16, 65520, math.Inf(1), []byte{0x00, 0x7c}},
		{backend.BFloat16, 1, 1, []byte{0x80, 0x3f}},
		{backend.BFloat16, 257, 256, []byte{0x80, 0x43}},
		{backend.Float64, -0.25, -0.25, []byte{0, 0, 0, 0, 0, 0, 0xd0, 0xbf}},
		{backend.Int32, -7, -7, []byte{0xf9, 0xff, 0xff, 0xff}},
		{backend.Int32, 2.5, 2, []byte{2, 0, 0, 0}},
		{backend.Int32, 3.5, 4, []byte{4, 0, 0, 0}},
		{backend.Int32, 1e12, math.MaxInt32, []byte{0xff, 0xff, 0xff, 0x7f}},
		{backend.Int32, -1e12, math.MinInt32, []byte{0, 0, 0, 0x80}},
		{backend.Int32, math.NaN(), 0, []byte{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			b := make([]byte, 3*tt.d.Size())
			Put(tt.d, b, 1, tt.in)
			require.Equal(t, tt.bytes, b[tt.d.Size():2*tt.d.Size()])
			require.Equal(t, tt.want, Get(tt.d, b, 1))
			require.Zero(t, Get(tt.d, b, 0))
			require.Zero(t, Get(tt.d, b, 2))
		})
	}
}

func TestGetPutInvalidPanics(t *testing.T) {
	b := make([]byte, 16)
	require.Panics(t, func() { Get(backend.DType(9), b, 0) })
	require.Panics(t, func() { Put(backend.DType(9), b, 0, 1) })
	require.Panics(t, func() { Get(backend.Float32, b, 4) })
}

func TestFill(t *testing.T) {
	for _, d := range backend.DTypes {
		for _, count := range []int{0, 1, 2, 3, 7, 64, 1000} {
			b := make([]byte, (count+1)*d.Size())
			Fill(d, b, count, -3)
			for i := range count {
				require.Equal(t, -3.0, Get(d, b, i), "%v count %d element %d", d, count, i)
			}
			require.Zero(t, Get(d, b, count), "%v: Fill wrote past count", d)
		}
	}
}

// aligned returns n bytes starting at an address that is a multiple of 16.
func aligned(n int) []byte {
	b := make([]byte, n+16)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 15)
	return b[off : off+n]
}

func TestViews(t *testing.T) {
	b := aligned(64)
	f32, ok := Float32s(b)
	require.True(t, ok)
	require.Len(t, f32, 16)
	f32[3] = 2.5
	require.Equal(t, 2.5, Get(backend.Float32, b, 3))

	f64, ok := Float64s(b)
	require.True(t, ok)
	require.Len(t, f64, 8)
	f64[7] = -1
	require.Equal(t, -1.0, Get(backend.Float64, b, 7))

	i32, ok := Int32s(b[16:])
	require.True(t, ok)
	i32[0] = -9
	require.Equal(t, -9.0, Get(backend.Int32, b, 4))

	u16, ok := Uint16s(b[2:])
	require.True(t, ok)
	u16[0] = F32ToBF16(3)
	require.Equal(t, 3.0, Get(backend.BFloat16, b, 1))

	_, ok = Float32s(b[2:])
	require.False(t, ok, "misaligned float32 view")
	_, ok = Float64s(b[4:])
	require.False(t, ok, "misaligned float64 view")
	_, ok = Uint16s(b[1:])
	require.False(t, ok, "misaligned uint16 view")

	empty, ok := Float32s(nil)
	require.True(t, ok)
	require.Empty(t, empty)
}

func TestAccumulate(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		op      backend.ReduceOp
		acc, x  []float32
		want    []float32
		wantNaN []bool
	}{
		{"sum", backend.Sum, []float32{1, -2, 0.5}, []float32{2, 2, 0.25}, []float32{3, 0, 0.75}, nil},
		{"max", backend.Max, []float32{1, -2, 5}, []float32{2, -3, 5}, []float32{2, -2, 5}, nil},
		{"min", backend.Min, []float32{1, -2, 5}, []float32{2, -3, 5}, []float32{1, -3, 5}, nil},
		{"max ignores nan", backend.Max, []float32{nan, 1, nan}, []float32{1, nan, nan}, []float32{1, 1, 0}, []bool{false, false, true}},
		{"min ignores nan", backend.Min, []float32{nan, 1, nan}, []float32{1, nan, nan}, []float32{1, 1, 0}, []bool{false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc := append([]float32(nil), tt.acc...)
			Accumulate(tt.op, acc, tt.x)
			for i := range acc {
				if tt.wantNaN != nil && tt.wantNaN[i] {
					require.True(t, math.IsNaN(float64(acc[i])), "element %d", i)
					continue
				}
				require.Equal(t, tt.want[i], acc[i], "element %d", i)
			}
			for i := range tt.acc {
				got := Combine(tt.op, float64(tt.acc[i]), float64(tt.x[i]))
				if tt.wantNaN != nil && tt.wantNaN[i] {
					require.True(t, math.IsNaN(got))
					continue
				}
				require.Equal(t, float64(tt.want[i]), got, "Combine element %d", i)
			}
			// The same through AccumulateHalf: every x is exact in both
			// 16-bit types.
			for _, h := range []struct {
				d      backend.DType
				encode func(float32) uint16
			}{{backend.BFloat16, F32ToBF16}, {backend.Float16, F32ToF16}} {
				xs := make([]uint16, len(tt.x))
				for i, v := range tt.x {
					xs[i] = h.encode(v)
				}
				acc := append([]float32(nil), tt.acc...)
				AccumulateHalf(h.d, tt.op, acc, xs)
				for i := range acc {
					if tt.wantNaN != nil && tt.wantNaN[i] {
						require.True(t, math.IsNaN(float64(acc[i])), "%v element %d", h.d, i)
						continue
					}
					require.Equal(t, tt.want[i], acc[i], "%v element %d", h.d, i)
				}
			}
		})
	}
	t.Run("int32 wraps", func(t *testing.T) {
		acc := []int32{math.MaxInt32, 5}
		Accumulate(backend.Sum, acc, []int32{1, -6})
		require.Equal(t, []int32{math.MinInt32, -1}, acc)
	})
	t.Run("invalid op panics", func(t *testing.T) {
		require.Panics(t, func() { Accumulate(backend.ReduceOp(7), []float64{1}, []float64{2}) })
		require.Panics(t, func() { Combine(backend.ReduceOp(7), 1, 2) })
	})
}

func TestPatternExact(t *testing.T) {
	const count = 2000
	for _, d := range backend.DTypes {
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Max, backend.Min} {
			for _, world := range []int{1, 2, 3, 8} {
				inputs := make([][]byte, world)
				for r := range inputs {
					inputs[r] = make([]byte, count*d.Size())
					Pattern(d, inputs[r], count, r, 7)
				}
				want := make([]byte, count*d.Size())
				Expected(d, op, want, count, world, 7)
				for i := range count {
					exact := PatternValue(0, 7, i)
					require.LessOrEqual(t, math.Abs(exact), float64(PatternRange))
					require.Equal(t, exact, Get(d, inputs[0], i))
					// Reduce in the element type's accumulator, rounding per step.
					acc := Get(d, inputs[0], i)
					for r := 1; r < world; r++ {
						v := PatternValue(r, 7, i)
						exact = Combine(op, exact, v)
						acc = Combine(op, acc, Get(d, inputs[r], i))
						Put(d, inputs[0], i, acc)
						acc = Get(d, inputs[0], i)
					}
					require.Equal(t, exact, acc, "%v %v world %d element %d", d, op, world, i)
					require.Equal(t, exact, Get(d, want, i))
				}
			}
		}
	}
}

func TestPatternVaries(t *testing.T) {
	distinct := map[float64]bool{}
	diffRank, diffSeed := 0, 0
	for i := range 1000 {
		v := PatternValue(0, 1, i)
		distinct[v] = true
		if v != PatternValue(1, 1, i) {
			diffRank++
		}
		if v != PatternValue(0, 2, i) {
			diffSeed++
		}
	}
	require.Len(t, distinct, 2*PatternRange+1)
	require.Greater(t, diffRank, 900)
	require.Greater(t, diffSeed, 900)
}

func TestCompare(t *testing.T) {
	d := backend.BFloat16
	a := make([]byte, 20)
	b := make([]byte, 20)
	Pattern(d, a, 10, 0, 1)
	Pattern(d, b, 10, 0, 1)
	wrong, first := Compare(d, a, b, 10)
	require.Zero(t, wrong)
	require.Nil(t, first)
	Put(d, b, 3, 100)
	Put(d, b, 8, 100)
	wrong, first = Compare(d, a, b, 10)
	require.Equal(t, 2, wrong)
	require.NotNil(t, first)
	require.Equal(t, 3, first.Index)
	require.Equal(t, 100.0, first.Want)
	require.Equal(t, PatternValue(0, 1, 3), first.Got)
	require.Contains(t, first.Error(), "element 3")
}

// TestEncodeMatchesPut stores the same values with Encode and with Put, in
// every type, aligned and one byte off, and expects the same bytes:
// integers, values that round, halfway cases, values beyond a type's range,
// subnormals, infinities and NaN.
func TestEncodeMatchesPut(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -7, 128, 0.1, 1.0 / 3, 65504, 65520, 1e10, -1e40, 3.4e38 * 2,
		1 + 1.0/256, 1 + 3.0/512, 2147483647.6, -2147483649, math.Inf(1), math.Inf(-1), math.NaN(), 1e-45, 5e-324,
		// float16's halfway cases, its smallest normal and subnormals.
		2049, 2051, -4097, math.Ldexp(1, -14), math.Ldexp(1, -24), math.Ldexp(1, -25), math.Ldexp(3, -26), math.Ldexp(3, -25),
		// Just above halfway in float16 and bfloat16, but halfway once
		// rounded to float32: rounding twice would get them wrong.
		1 + math.Ldexp(1, -11) + math.Ldexp(1, -40), 1 + math.Ldexp(1, -8) + math.Ldexp(1, -40)}
	for _, d := range backend.DTypes {
		t.Run(d.String(), func(t *testing.T) {
			want := make([]byte, len(vals)*d.Size())
			for i, v := range vals {
				Put(d, want, i, v)
			}
			for _, off := range []int{0, 1} {
				got := make([]byte, len(want)+off)[off:]
				Encode(d, got, vals)
				require.Equal(t, want, got, "offset %d", off)
			}
			got := make([]byte, len(want))
			EncodeFunc(d, got, len(vals), func(i int) float64 { return vals[i] })
			require.Equal(t, want, got, "EncodeFunc")
		})
	}
}

// TestRepeat fills buffers from their first bytes: periods that divide
// the length and that do not, one byte, and a period as long as the buffer.
func TestRepeat(t *testing.T) {
	for _, tt := range []struct {
		period, n int
	}{{1, 9}, {3, 12}, {3, 13}, {4, 4}, {5, 3}} {
		b := make([]byte, tt.n)
		for i := range min(tt.period, tt.n) {
			b[i] = byte(i + 1)
		}
		Repeat(b, tt.period)
		for i := range b {
			require.Equal(t, byte(i%tt.period+1), b[i], "period %d, length %d, byte %d", tt.period, tt.n, i)
		}
	}
}

// TestVendorAvgBound averages Pattern values as NCCL's ncclAvg does on a
// floating type (each value times 1/world rounded to the type, the
// products added in the type, in several orders) at the worlds where that
// is not exact, and requires every result within VendorAvgBound of the
// exact quotient, while a sum left undivided, or (in every type but
// bfloat16, whose rounding at world 7 exceeds a seventh) a sum that lost
// one rank's value, lies outside it. Some results must differ from the
// exact quotient, or the bound would not be needed.
func TestVendorAvgBound(t *testing.T) {
	buf := make([]byte, 8)
	for _, d := range []backend.DType{backend.BFloat16, backend.Float16, backend.Float32, backend.Float64} {
		round := func(v float64) float64 { Put(d, buf, 0, v); return Get(d, buf, 0) }
		for _, world := range []int{3, 5, 6, 7} {
			inexact := 0
			scale := round(1 / float64(world))
			for i := range 2000 {
				exact, abs := 0.0, 0.0
				x := make([]float64, world)
				for r := range x {
					x[r] = PatternValue(r, 11, i)
					exact += x[r]
					abs += math.Abs(x[r])
				}
				bound := VendorAvgBound(d, world, abs)
				exact /= float64(world)
				for start := range world {
					acc := 0.0
					for k := range world {
						r := (start + k) % world
						if start%2 == 1 {
							r = (start - k + world) % world
						}
						acc = round(acc + round(x[r]*scale))
					}
					require.LessOrEqual(t, math.Abs(acc-exact), bound, "%v world %d element %d", d, world, i)
					if acc != round(exact) {
						inexact++
					}
				}
				if exact != 0 {
					require.Greater(t, math.Abs(exact*float64(world)-exact), bound, "%v: an undivided sum must be out of bound", d)
				}
				if d != backend.BFloat16 && x[0] != 0 {
					require.Greater(t, math.Abs(x[0]/float64(world)), bound, "%v: a lost rank must be out of bound", d)
				}
			}
			if d != backend.Float64 {
				require.Positive(t, inexact, "%v world %d: no result differed from the exact quotient", d, world)
			}
		}
	}
	require.Zero(t, VendorAvgBound(backend.Int32, 3, 48))
}

func TestCompareWithin(t *testing.T) {
	d := backend.Float32
	got, want := make([]byte, 40), make([]byte, 40)
	for i := range 10 {
		Put(d, want, i, float64(i))
		Put(d, got, i, float64(i)+0.25)
	}
	none := func(int) float64 { return 0 }
	quarter := func(int) float64 { return 0.25 }
	wrong, first := CompareWithin(d, got, want, 10, quarter)
	require.Zero(t, wrong)
	require.Nil(t, first)
	wrong, first = CompareWithin(d, got, want, 10, none)
	require.Equal(t, 10, wrong)
	require.Equal(t, 0, first.Index)
	Put(d, got, 4, math.NaN())
	wrong, first = CompareWithin(d, got, want, 10, quarter)
	require.Equal(t, 1, wrong)
	require.Equal(t, 4, first.Index)
}
