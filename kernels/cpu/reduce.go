package cpu

import (
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/internal/race"
)

// chunkElems is how many elements reduce handles at a time: small enough
// for the accumulator chunk to stay in L1.
const chunkElems = 1024

// reduce sets dst[i] = op(…op(op(src0[i], src1[i]), src2[i])…) for every
// element, reducing the sources in order. Float16 and bfloat16 accumulate in
// float32 and round once, to nearest even; float32 accumulates in float32,
// float64 in float64 and int32 with wrap-around, as the kernel ABI requires.
// dst may be one of the sources (exactly, not shifted): each chunk is read
// from every source before it is written. Every slice must have len(dst)
// bytes, a multiple of the element size.
//
// Each chunk takes one pass per source plus one to store: the first source
// is loaded (widened) into an accumulator, every other is widened and
// reduced into it in one loop (numeric.Accumulate, numeric.AccumulateHalf),
// and the result is stored (rounded). The loops read and write through
// typed views; a chunk of a slice that is not aligned to its element
// (backend allocations are 16-byte aligned, so are the slices the
// algorithms cut from them) is first copied to an aligned scratch chunk, so
// the bits do not depend on alignment.
func reduce(d backend.DType, op backend.ReduceOp, dst []byte, srcs [][]byte) {
	// The conversion and reduction loops are not instrumented for the race
	// detector (internal/numeric): what they read and write of the shared
	// buffers is reported here, once.
	for _, src := range srcs {
		race.Read(src)
	}
	race.Write(dst)
	switch d {
	case backend.Float32:
		reduceAs(dst, srcs, 4, direct[float32]{op})
	case backend.Float64:
		reduceAs(dst, srcs, 8, direct[float64]{op})
	case backend.Int32:
		reduceAs(dst, srcs, 4, direct[int32]{op})
	case backend.Float16:
		reduceAs(dst, srcs, 2, half{d, op, numeric.F16sToF32s, numeric.F32sToF16s})
	case backend.BFloat16:
		reduceAs(dst, srcs, 2, half{d, op, numeric.BF16sToF32s, numeric.F32sToBF16s})
	}
}

// codec moves chunks between bytes holding elements and accumulators of
// type T: load widens, accumulate widens and reduces, store rounds. The
// element slices it gets are aligned.
type codec[T numeric.Accumulator] interface {
	load(acc []T, b []byte)
	accumulate(acc []T, b []byte)
	store(b []byte, acc []T)
}

// reduceAs is reduce for elements of size bytes accumulated as T.
func reduceAs[T numeric.Accumulator, C codec[T]](dst []byte, srcs [][]byte, size int, c C) {
	var accBuf [chunkElems]T
	var scratch alignedChunk
	n := len(dst) / size
	for lo := 0; lo < n; lo += chunkElems {
		m := min(chunkElems, n-lo)
		b0, b1 := lo*size, (lo+m)*size
		acc := accBuf[:m]
		for s, src := range srcs {
			b := scratch.in(src[b0:b1], size)
			if s == 0 {
				c.load(acc, b)
			} else {
				c.accumulate(acc, b)
			}
		}
		out := dst[b0:b1]
		if b, copied := scratch.out(out, size); copied {
			c.store(b, acc)
			copy(out, b)
		} else {
			c.store(out, acc)
		}
	}
}

// alignedChunk is scratch space for a chunk whose bytes do not start on a
// multiple of their element size.
type alignedChunk [chunkElems*8 + 8]byte

// in returns b itself if it is aligned to size, else a copy of it in the
// scratch space.
func (a *alignedChunk) in(b []byte, size int) []byte {
	t, copied := a.out(b, size)
	if copied {
		copy(t, b)
	}
	return t
}

// out returns b itself and false if it is aligned to size, else an aligned
// slice of the scratch space as long as b and true.
func (a *alignedChunk) out(b []byte, size int) ([]byte, bool) {
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0 {
		return b, false
	}
	off := int(-uintptr(unsafe.Pointer(&a[0])) & 7)
	return a[off : off+len(b)], true
}

// direct is the codec of a type accumulated as itself.
type direct[T numeric.Accumulator] struct{ op backend.ReduceOp }

func (direct[T]) load(acc []T, b []byte) { copy(acc, elems[T](b)) }

func (c direct[T]) accumulate(acc []T, b []byte) { numeric.Accumulate(c.op, acc, elems[T](b)) }

func (direct[T]) store(b []byte, acc []T) { copy(elems[T](b), acc) }

// half is the codec of a 16-bit float type (d) accumulated in float32.
type half struct {
	d      backend.DType
	op     backend.ReduceOp
	widen  func([]float32, []uint16)
	narrow func([]uint16, []float32)
}

func (c half) load(acc []float32, b []byte) { c.widen(acc, elems[uint16](b)) }

func (c half) accumulate(acc []float32, b []byte) {
	numeric.AccumulateHalf(c.d, c.op, acc, elems[uint16](b))
}

func (c half) store(b []byte, acc []float32) { c.narrow(elems[uint16](b), acc) }

// elems views aligned bytes as elements of T.
func elems[T numeric.Accumulator | uint16 | uint64](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(*new(T))))
}
