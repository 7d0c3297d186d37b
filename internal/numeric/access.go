package numeric

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/race"
)

// Get returns element i of a little-endian buffer of type d, widened to
// float64 (exactly: every supported type fits). It panics, as slice
// indexing does, if the element lies outside b or d is not valid.
func Get(d backend.DType, b []byte, i int) float64 {
	switch d {
	case backend.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case backend.Float16:
		return float64(F16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case backend.BFloat16:
		return float64(BF16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case backend.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case backend.Int32:
		return float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	panic(fmt.Sprintf("numeric: invalid %v", d))
}

// Put stores v as element i of a little-endian buffer of type d. Floating
// types round to nearest even (once, straight from float64). Int32 rounds
// to nearest even and saturates at the int32 range; NaN stores 0. It panics
// like Get.
func Put(d backend.DType, b []byte, i int, v float64) {
	switch d {
	case backend.Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case backend.Float16:
		binary.LittleEndian.PutUint16(b[2*i:], F64ToF16(v))
	case backend.BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], F64ToBF16(v))
	case backend.Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case backend.Int32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(toInt32(v)))
	default:
		panic(fmt.Sprintf("numeric: invalid %v", d))
	}
}

// Encode stores vals[i] as element i of b for every i < len(vals), rounded
// as Put rounds, with the type chosen once for the whole slice rather than
// per element. b must hold len(vals) elements.
//
//go:norace
//go:nocheckptr
func Encode(d backend.DType, b []byte, vals []float64) {
	race.Read(vals)
	race.Write(b[:len(vals)*d.Size()])
	switch d {
	case backend.Float32:
		if encodeFloat[float32](b, vals) {
			return
		}
	case backend.Float64:
		if encodeFloat[float64](b, vals) {
			return
		}
	case backend.Int32:
		if v, ok := Int32s(b); ok {
			for i, x := range vals {
				v[i] = toInt32(x)
			}
			return
		}
	case backend.Float16, backend.BFloat16:
		if v, ok := Uint16s(b); ok {
			encodeHalf(v[:len(vals)], vals, d == backend.BFloat16)
			return
		}
	}
	for i, x := range vals {
		Put(d, b, i, x)
	}
}

// encodeHalf is Encode for float16 (bf false) and bfloat16 into a typed
// view of the buffer. A value float32 holds exactly rounds the same from
// it (no double rounding), through the cheaper conversion.
//
//go:norace
func encodeHalf(v []uint16, vals []float64, bf bool) {
	for i, x := range vals {
		f := float32(x)
		switch exact := float64(f) == x; {
		case bf && exact:
			v[i] = F32ToBF16(f)
		case bf:
			v[i] = F64ToBF16(x)
		case exact:
			v[i] = F32ToF16(f)
		default:
			v[i] = F64ToF16(x)
		}
	}
}

// encodeFloat is Encode for float32 and float64 through a typed view of
// b; false if b is not aligned for one.
//
//go:norace
//go:nocheckptr
func encodeFloat[T float32 | float64](b []byte, vals []float64) bool {
	v, ok := view[T](b)
	if !ok {
		return false
	}
	v = v[:len(vals)]
	for i, x := range vals {
		v[i] = T(x)
	}
	return true
}

// encodeChunk is how many values EncodeFunc computes before
// encoding them.
const encodeChunk = 1024

// EncodeFunc stores value(i) as element i of b for i < count, rounded as
// Put rounds: the values are computed a chunk at a time and each chunk
// stored by Encode.
func EncodeFunc(d backend.DType, b []byte, count int, value func(i int) float64) {
	EncodeValues(d, b, count, funcValues(value))
}

// Valuer gives the value of element i. Pattern and Expected implement it
// with methods built without race instrumentation (//go:norace), so that
// computing a value costs no detector calls under -race (a closure's
// would): callers that encode many values can do the same.
type Valuer interface{ Value(i int) float64 }

// funcValues is a Valuer from a function.
type funcValues func(i int) float64

func (f funcValues) Value(i int) float64 { return f(i) }

// EncodeValues is EncodeFunc for any Valuer. vals is this call's own
// scratch, so its loop needs no race checks (Encode reports what it reads
// and writes).
//
//go:norace
//go:nocheckptr
func EncodeValues[V Valuer](d backend.DType, b []byte, count int, v V) {
	var vals [encodeChunk]float64
	size := d.Size()
	for lo := 0; lo < count; lo += encodeChunk {
		c := vals[:min(encodeChunk, count-lo)]
		for i := range c {
			c[i] = v.Value(lo + i)
		}
		Encode(d, b[lo*size:], c)
	}
}

func toInt32(v float64) int32 {
	switch {
	case v != v:
		return 0
	case v >= math.MaxInt32:
		return math.MaxInt32
	case v <= math.MinInt32:
		return math.MinInt32
	}
	return int32(math.RoundToEven(v))
}

// Fill stores v into elements [0, count) of b.
func Fill(d backend.DType, b []byte, count int, v float64) {
	if count == 0 {
		return
	}
	// Encode once, then replicate the bytes.
	Put(d, b, 0, v)
	Repeat(b[:count*d.Size()], d.Size())
}

// Repeat fills b with copies of its first period bytes (the last copy cut
// short if period does not divide len(b)), by doubling copies: a handful
// of memmoves rather than a loop over every byte, which the race detector
// would check one by one.
func Repeat(b []byte, period int) {
	if period <= 0 {
		return
	}
	for filled := period; filled < len(b); filled *= 2 {
		copy(b[filled:], b[:filled])
	}
}

// littleEndian reports whether the host stores integers least significant
// byte first, which the typed views require.
func littleEndian() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// view reinterprets b as a slice of T when that is safe: the host is little
// endian (so the view agrees with Get and Put) and b starts on a multiple of
// T's size. Buffers from backend allocations are 16-byte aligned, so views of
// them (and of 16-byte aligned slices of them) always succeed; a caller must
// fall back to Get/Put or encoding/binary when ok is false.
func view[T uint16 | int32 | float32 | float64](b []byte) (v []T, ok bool) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < size {
		return nil, littleEndian()
	}
	if !littleEndian() || uintptr(unsafe.Pointer(&b[0]))%uintptr(size) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size), true
}

// Float32s views b as float32 elements (see Uint16s for when ok is false).
// The view aliases b.
func Float32s(b []byte) (v []float32, ok bool) { return view[float32](b) }

// Float64s views b as float64 elements; the view aliases b.
func Float64s(b []byte) (v []float64, ok bool) { return view[float64](b) }

// Int32s views b as int32 elements; the view aliases b.
func Int32s(b []byte) (v []int32, ok bool) { return view[int32](b) }

// Uint16s views b as 16-bit elements (float16 or bfloat16 bit patterns);
// the view aliases b and has len(b)/2 elements. ok is false when b does not
// start on a multiple of the element size or the host is big endian; the
// caller then decodes with encoding/binary instead.
func Uint16s(b []byte) (v []uint16, ok bool) { return view[uint16](b) }
