package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/race"
)

// refF16 is binary16 decoded from its definition, in float64.
func refF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10&0x1f), int(h&0x3ff)
	switch exp {
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * math.Ldexp(float64(man), -24)
	}
	return sign * math.Ldexp(float64(1024+man), exp-25)
}

// refBF16 is bfloat16 decoded from its definition, in float64.
func refBF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>7&0xff), int(h&0x7f)
	switch exp {
	case 0xff:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * math.Ldexp(float64(man), -133)
	}
	return sign * math.Ldexp(float64(128+man), exp-134)
}

type format16 struct {
	name     string
	toF32    func(uint16) float32
	fromF32  func(float32) uint16
	fromF64  func(float64) uint16
	ref      func(uint16) float64
	quietBit uint16
	maxBits  uint16  // largest finite
	overMax  float64 // the value one ulp above the largest finite (2^(emax+1))
}

var formats = []format16{
	{"float16", F16ToF32, F32ToF16, F64ToF16, refF16, 0x0200, 0x7bff, 65536},
	{"bfloat16", BF16ToF32, F32ToBF16, F64ToBF16, refBF16, 0x0040, 0x7f7f, math.Ldexp(1, 128)},
}

// TestRoundTripExhaustive widens every one of the 65536 bit patterns and
// narrows it back, through float32 and through float64.
func TestRoundTripExhaustive(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			for i := range 1 << 16 {
				h := uint16(i)
				w := f.toF32(h)
				want := f.ref(h)
				if math.IsNaN(want) {
					require.True(t, math.IsNaN(float64(w)), "%#04x", h)
					require.Equal(t, h|f.quietBit, f.fromF32(w), "%#04x", h)
					require.Equal(t, h|f.quietBit, f.fromF64(float64(w)), "%#04x", h)
					continue
				}
				require.Equal(t, math.Float64bits(want), math.Float64bits(float64(w)), "%#04x", h)
				require.Equal(t, h, f.fromF32(w), "%#04x", h)
				require.Equal(t, h, f.fromF64(float64(w)), "%#04x", h)
			}
		})
	}
}

// TestRoundingMidpoints checks every pair of adjacent finite values: the
// midpoint rounds to the even one, anything nearer one side rounds to it,
// and from the largest finite value upward the midpoint goes to infinity.
func TestRoundingMidpoints(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			for _, sign := range []uint16{0, 0x8000} {
				for h := uint16(0); h <= f.maxBits; h++ {
					lo := f.ref(h | sign)
					hi := f.overMax
					if h < f.maxBits {
						hi = f.ref((h + 1) | sign)
					} else if sign != 0 {
						hi = -hi
					}
					mid := lo + (hi-lo)/2 // exact in float64
					even := h
					if h&1 == 1 {
						even = h + 1
					}
					want := even | sign
					mid32 := float32(mid)
					require.Equal(t, mid, float64(mid32), "midpoint not exact in float32")
					require.Equal(t, want, f.fromF32(mid32), "%s mid of %#04x", f.name, h|sign)
					require.Equal(t, want, f.fromF64(mid), "%s mid of %#04x", f.name, h|sign)

					away := float32(math.Inf(1))
					if sign != 0 {
						away = -away
					}
					above := math.Nextafter32(mid32, away)
					below := math.Nextafter32(mid32, -away)
					require.Equal(t, (h+1)|sign, f.fromF32(above), "%s above mid of %#04x", f.name, h|sign)
					require.Equal(t, h|sign, f.fromF32(below), "%s below mid of %#04x", f.name, h|sign)
					require.Equal(t, (h+1)|sign, f.fromF64(math.Nextafter(mid, float64(away))))
					require.Equal(t, h|sign, f.fromF64(math.Nextafter(mid, float64(-away))))
				}
			}
		})
	}
}

func TestSpecialValues(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name     string
		in       float64
		f16, b16 uint16
	}{
		{"zero", 0, 0x0000, 0x0000},
		{"negative zero", math.Copysign(0, -1), 0x8000, 0x8000},
		{"one", 1, 0x3c00, 0x3f80},
		{"minus two", -2, 0xc000, 0xc000},
		{"infinity", inf, 0x7c00, 0x7f80},
		{"negative infinity", -inf, 0xfc00, 0xff80},
		{"nan", nan, 0x7e00, 0x7fc0},
		{"half max", 65504, 0x7bff, 0x4780},
		{"just below half overflow", 65519.99, 0x7bff, 0x4780},
		{"half overflow tie", 65520, 0x7c00, 0x4780},
		{"smallest half subnormal", math.Ldexp(1, -24), 0x0001, 0x3380},
		{"half underflow tie", math.Ldexp(1, -25), 0x0000, 0x3300},
		{"above half underflow tie", math.Ldexp(1.5, -25), 0x0001, 0x3340},
		{"float32 max", math.MaxFloat32, 0x7c00, 0x7f80},
		{"float32 subnormal", math.SmallestNonzeroFloat32, 0x0000, 0x0000},
		{"smallest bfloat16 subnormal", -math.Ldexp(1, -133), 0x8000, 0x8001},
		{"bfloat16 subnormal tie to even", math.Ldexp(3, -134), 0x0000, 0x0002},
		{"float64 tiny", -math.SmallestNonzeroFloat64, 0x8000, 0x8000},
		{"float64 huge", math.MaxFloat64, 0x7c00, 0x7f80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.f16, F64ToF16(tt.in), "F64ToF16")
			require.Equal(t, tt.b16, F64ToBF16(tt.in), "F64ToBF16")
			if f := float32(tt.in); float64(f) == tt.in || math.IsNaN(tt.in) {
				require.Equal(t, tt.f16, F32ToF16(f), "F32ToF16")
				require.Equal(t, tt.b16, F32ToBF16(f), "F32ToBF16")
			}
		})
	}
}

// TestFloat32PathsAgree compares the fast float32 conversions with the
// float64 ones over a stride through all 2^32 float32 bit patterns.
func TestFloat32PathsAgree(t *testing.T) {
	stride := uint64(4099)
	if race.Enabled {
		stride = 40009
	}
	for x := uint64(0); x < 1<<32; x += stride {
		f := math.Float32frombits(uint32(x))
		if math.IsNaN(float64(f)) {
			continue // float64 conversion may drop the payload; covered elsewhere
		}
		require.Equal(t, F64ToF16(float64(f)), F32ToF16(f), "%#08x", x)
		require.Equal(t, F64ToBF16(float64(f)), F32ToBF16(f), "%#08x", x)
	}
}

// TestRoundF64MatchesHardware checks the general rounder against Go's own
// float64 → float32 conversion, which rounds to nearest even.
func TestRoundF64MatchesHardware(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		// Exponents around float32's whole range, subnormals and overflow
		// included, with random mantissas (often exact ties).
		e := rng.IntN(300) - 160
		m := rng.Uint64() >> rng.IntN(64)
		v := math.Ldexp(float64(m|1<<11), e-11)
		if rng.IntN(2) == 0 {
			v = -v
		}
		require.Equal(t, uint64(math.Float32bits(float32(v))), roundF64(v, 8, 23), "%v", v)
	}
}

func TestSliceConversions(t *testing.T) {
	src := []float32{0, 1, -1.5, 65504, 1e-7, float32(math.Inf(-1))}
	h := make([]uint16, len(src))
	b := make([]uint16, len(src))
	F32sToF16s(h, src)
	F32sToBF16s(b, src)
	back := make([]float32, len(src))
	F16sToF32s(back, h)
	for i := range src {
		require.Equal(t, F32ToF16(src[i]), h[i])
		require.Equal(t, F16ToF32(h[i]), back[i])
	}
	BF16sToF32s(back, b)
	for i := range src {
		require.Equal(t, F32ToBF16(src[i]), b[i])
		require.Equal(t, BF16ToF32(b[i]), back[i])
	}
}
