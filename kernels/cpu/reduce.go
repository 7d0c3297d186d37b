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
	le := binary.LittleEndian
	switch d {
	case backend.Float32:
		c := direct[float32]{numeric.Float32s, 4,
			func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) },
			func(b []byte, f float32) { le.PutUint32(b, math.Float32bits(f)) }}
		reduceAs(op, dst, srcs, 4, c.load, c.store)
	case backend.Float16:
		c := half{numeric.F16sToF32s, numeric.F32sToF16s, numeric.F16ToF32, numeric.F32ToF16}
		reduceAs(op, dst, srcs, 2, c.load, c.store)
	case backend.BFloat16:
		c := half{numeric.BF16sToF32s, numeric.F32sToBF16s, numeric.BF16ToF32, numeric.F32ToBF16}
		reduceAs(op, dst, srcs, 2, c.load, c.store)
	case backend.Float64:
		c := direct[float64]{numeric.Float64s, 8,
			func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) },
			func(b []byte, f float64) { le.PutUint64(b, math.Float64bits(f)) }}
		reduceAs(op, dst, srcs, 8, c.load, c.store)
	case backend.Int32:
		c := direct[int32]{numeric.Int32s, 4,
			func(b []byte) int32 { return int32(le.Uint32(b)) },
			func(b []byte, x int32) { le.PutUint32(b, uint32(x)) }}
		reduceAs(op, dst, srcs, 4, c.load, c.store)
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

// direct moves an element type that is accumulated as itself: through a
// typed view of aligned bytes, else element by element from its
// little-endian bits.
type direct[T any] struct {
	view func([]byte) ([]T, bool)
	size int
	get  func([]byte) T
	put  func([]byte, T)
}

func (c direct[T]) load(dst []T, b []byte) {
	if v, ok := c.view(b); ok {
		copy(dst, v)
		return
	}
	for i := range dst {
		dst[i] = c.get(b[c.size*i:])
	}
}

func (c direct[T]) store(b []byte, src []T) {
	if v, ok := c.view(b); ok {
		copy(v, src)
		return
	}
	for i, x := range src {
		c.put(b[c.size*i:], x)
	}
}

// half moves a 16-bit float type accumulated in float32: many converts
// whole slices (aligned bytes), one a single element.
type half struct {
	many   func([]float32, []uint16)
	manyTo func([]uint16, []float32)
	one    func(uint16) float32
	oneTo  func(float32) uint16
}

func (c half) load(dst []float32, b []byte) {
	if v, ok := numeric.Uint16s(b); ok {
		c.many(dst, v)
		return
	}
	for i := range dst {
		dst[i] = c.one(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

func (c half) store(b []byte, src []float32) {
	if v, ok := numeric.Uint16s(b); ok {
		c.manyTo(v, src)
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(b[2*i:], c.oneTo(f))
	}
}
