package numeric

import (
	"math"

	"github.com/intranode/intranode/internal/vec"
)

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32. The
// conversion is exact; NaN payloads are kept (shifted into the wider
// mantissa) and the sign of zeros and infinities is preserved.
//
//go:norace
//go:nocheckptr
func F16ToF32(h uint16) float32 {
	// Without branches on the common path: the half's exponent and
	// mantissa, placed at the bottom of a float32's, read as a float32 that
	// is 2^112 too small (a subnormal one for half subnormals), so one
	// exact multiply rebiases normals and normalises subnormals alike. Only
	// infinities and NaNs need their exponent set by hand.
	sign := uint32(h&0x8000) << 16
	em := uint32(h & 0x7fff)
	f := math.Float32frombits(em<<13) * 0x1p112
	if em >= 0x7c00 {
		f = math.Float32frombits(0x7f800000 | em<<13)
	}
	return math.Float32frombits(math.Float32bits(f) | sign)
}

// F32ToF16 rounds a float32 to the nearest binary16 value, ties to even.
// Values beyond the largest finite half (65504) round to infinity as IEEE
// requires (from 65520 up); NaNs stay NaN (quiet, sign and top payload bits
// kept).
//
//go:norace
//go:nocheckptr
func F32ToF16(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	exp := int(x>>23) & 0xff
	man := x & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(man>>13)
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is subnormal (or zero): the mantissa with its implicit bit,
		// shifted so that one unit is 2⁻²⁴. Float32 subnormals (exp == 0)
		// are far below 2⁻²⁵ and land in the e < -10 case.
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint(14 - e)
		q := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || rem == mid && q&1 == 1 {
			q++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(q)
	}
	q := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && q&1 == 1 {
		q++ // a carry out of the mantissa bumps the exponent, up to infinity
	}
	return sign | uint16(q)
}

// BF16ToF32 widens a bfloat16 bit pattern to float32 (exact).
//
//go:norace
//go:nocheckptr
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds a float32 to the nearest bfloat16, ties to even. NaNs
// stay NaN: the quiet bit is set so that dropping the low payload bits never
// turns a NaN into an infinity.
//
//go:norace
//go:nocheckptr
func F32ToBF16(f float32) uint16 {
	x := math.Float32bits(f)
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16) | 0x40
	}
	x += 0x7fff + (x>>16)&1
	return uint16(x >> 16)
}

// F64ToF16 rounds a float64 to the nearest binary16, ties to even, in one
// step (going through float32 could round twice).
func F64ToF16(v float64) uint16 { return uint16(roundF64(v, 5, 10)) }

// F64ToBF16 rounds a float64 to the nearest bfloat16, ties to even, in one
// step.
func F64ToBF16(v float64) uint16 { return uint16(roundF64(v, 8, 7)) }

// roundF64 rounds v to the binary interchange format with ebits exponent
// bits and mbits stored mantissa bits, to nearest even, and returns its bit
// pattern. It handles formats no wider than float32 (ebits ≤ 8, mbits ≤ 23),
// so float64 subnormals always round to zero.
func roundF64(v float64, ebits, mbits uint) uint64 {
	x := math.Float64bits(v)
	sign := x >> 63 << (ebits + mbits)
	exp := int(x >> 52 & 0x7ff)
	man := x & (1<<52 - 1)
	expMax := uint64(1)<<ebits - 1
	inf := sign | expMax<<mbits
	if exp == 0x7ff {
		if man == 0 {
			return inf
		}
		return inf | 1<<(mbits-1) | man>>(52-mbits)
	}
	if exp == 0 {
		return sign
	}
	bias := 1<<(ebits-1) - 1
	e := exp - 1023 + bias
	if e >= int(expMax) {
		return inf
	}
	var q, rem, mid uint64
	if e >= 1 {
		shift := 52 - mbits
		q = uint64(e)<<mbits | man>>shift
		rem = man & (1<<shift - 1)
		mid = 1 << (shift - 1)
	} else {
		shift := 52 - mbits + uint(1-e)
		if shift > 60 {
			return sign
		}
		m := man | 1<<52
		q = m >> shift
		rem = m & (1<<shift - 1)
		mid = 1 << (shift - 1)
	}
	if rem > mid || rem == mid && q&1 == 1 {
		q++
	}
	if q >= expMax<<mbits {
		return inf
	}
	return sign | q
}

// F16sToF32s widens src into dst; dst must be at least as long as src.
func F16sToF32s(dst []float32, src []uint16) { convert(dst, src, vec.WidenF16, F16ToF32) }

// F32sToF16s rounds src into dst; dst must be at least as long as src.
func F32sToF16s(dst []uint16, src []float32) { convert(dst, src, vec.NarrowF16, F32ToF16) }

// BF16sToF32s widens src into dst; dst must be at least as long as src.
func BF16sToF32s(dst []float32, src []uint16) { convert(dst, src, vec.WidenBF16, BF16ToF32) }

// F32sToBF16s rounds src into dst; dst must be at least as long as src.
func F32sToBF16s(dst []uint16, src []float32) { convert(dst, src, vec.NarrowBF16, F32ToBF16) }

// convert converts src into dst: the vector loop bulk does what it can
// (it returns how many elements), one converts the rest.
//
//go:norace
//go:nocheckptr
func convert[D, S any](dst []D, src []S, bulk func([]D, []S) int, one func(S) D) {
	dst = dst[:len(src)]
	k := bulk(dst, src)
	dst, src = dst[k:], src[k:]
	for i, x := range src {
		dst[i] = one(x)
	}
}
