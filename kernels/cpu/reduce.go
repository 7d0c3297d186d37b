package cpu

import (
	"encoding/binary"
	"math"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
)

// chunkElems is how many elements reduce handles at a time: small enough
// for two accumulator chunks to stay in L1.
const chunkElems = 1024

// reduce sets dst[i] = op(…op(op(src0[i], src1[i]), src2[i])…) for every
// element, reducing the sources in order. Float16 and bfloat16 accumulate in
// float32 and round once, to nearest even; float32 accumulates in float32,
// float64 in float64 and int32 with wrap-around, as the kernel ABI requires.
// dst may be one of the sources (exactly, not shifted): each chunk is read
// from every source before it is written. Every slice must have len(dst)
// bytes, a multiple of the element size.
//
// Aligned buffers (backend allocations are 16-byte aligned, so are the
// slices the algorithms cut from them) are read and written through typed
// views; anything else takes an encoding/binary path with the same
// arithmetic, so the bits do not depend on alignment.
func reduce(d backend.DType, op backend.ReduceOp, dst []byte, srcs [][]byte) {
	switch d {
	case backend.Float32:
		reduceAs(op, dst, srcs, 4, loadF32, storeF32)
	case backend.Float16:
		reduceAs(op, dst, srcs, 2, loadF16, storeF16)
	case backend.BFloat16:
		reduceAs(op, dst, srcs, 2, loadBF16, storeBF16)
	case backend.Float64:
		reduceAs(op, dst, srcs, 8, loadF64, storeF64)
	case backend.Int32:
		reduceAs(op, dst, srcs, 4, loadI32, storeI32)
	}
}

func reduceAs[T numeric.Accumulator](op backend.ReduceOp, dst []byte, srcs [][]byte, size int,
	load func([]T, []byte), store func([]byte, []T)) {
	var accBuf, tmpBuf [chunkElems]T
	n := len(dst) / size
	for lo := 0; lo < n; lo += chunkElems {
		m := min(chunkElems, n-lo)
		b0, b1 := lo*size, (lo+m)*size
		acc, tmp := accBuf[:m], tmpBuf[:m]
		load(acc, srcs[0][b0:b1])
		for _, s := range srcs[1:] {
			load(tmp, s[b0:b1])
			numeric.Accumulate(op, acc, tmp)
		}
		store(dst[b0:b1], acc)
	}
}

func loadF32(dst []float32, b []byte) {
	if v, ok := numeric.Float32s(b); ok {
		copy(dst, v)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func storeF32(b []byte, src []float32) {
	if v, ok := numeric.Float32s(b); ok {
		copy(v, src)
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
}

func loadF64(dst []float64, b []byte) {
	if v, ok := numeric.Float64s(b); ok {
		copy(dst, v)
		return
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
}

func storeF64(b []byte, src []float64) {
	if v, ok := numeric.Float64s(b); ok {
		copy(v, src)
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
}

func loadI32(dst []int32, b []byte) {
	if v, ok := numeric.Int32s(b); ok {
		copy(dst, v)
		return
	}
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func storeI32(b []byte, src []int32) {
	if v, ok := numeric.Int32s(b); ok {
		copy(v, src)
		return
	}
	for i, x := range src {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
}

func loadF16(dst []float32, b []byte) {
	if v, ok := numeric.Uint16s(b); ok {
		numeric.F16sToF32s(dst, v)
		return
	}
	for i := range dst {
		dst[i] = numeric.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

func storeF16(b []byte, src []float32) {
	if v, ok := numeric.Uint16s(b); ok {
		numeric.F32sToF16s(v, src)
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(b[2*i:], numeric.F32ToF16(f))
	}
}

func loadBF16(dst []float32, b []byte) {
	if v, ok := numeric.Uint16s(b); ok {
		numeric.BF16sToF32s(dst, v)
		return
	}
	for i := range dst {
		dst[i] = numeric.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

func storeBF16(b []byte, src []float32) {
	if v, ok := numeric.Uint16s(b); ok {
		numeric.F32sToBF16s(v, src)
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(b[2*i:], numeric.F32ToBF16(f))
	}
}
