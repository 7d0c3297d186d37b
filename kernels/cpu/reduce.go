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
// reduced into it in one loop (numeric.Accumulate, numeric.AccumulateHalf,
// vector loops where the machine has them), and the result is stored
// (rounded). The type and op are chosen once per chunk, never per element,
// and every call is static, so the accumulator and scratch chunks stay on
// the stack. The loops read and write through typed views; a chunk of a
// slice that is not aligned to its element (backend allocations are
// 16-byte aligned, so are the slices the algorithms cut from them) is
// first copied to an aligned scratch chunk, so the bits do not depend on
// alignment.
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
		reduceDirect[float32](op, dst, srcs)
	case backend.Float64:
		reduceDirect[float64](op, dst, srcs)
	case backend.Int32:
		reduceDirect[int32](op, dst, srcs)
	case backend.Float16, backend.BFloat16:
		reduceHalf(d, op, dst, srcs)
	}
}

// reduceDirect is reduce for a type accumulated as itself.
func reduceDirect[T numeric.Accumulator](op backend.ReduceOp, dst []byte, srcs [][]byte) {
	var accBuf [chunkElems]T
	var scratch alignedChunk
	size := int(unsafe.Sizeof(accBuf[0]))
	n := len(dst) / size
	for lo := 0; lo < n; lo += chunkElems {
		m := min(chunkElems, n-lo)
		b0, b1 := lo*size, (lo+m)*size
		acc := accBuf[:m]
		for s, src := range srcs {
			x := elems[T](scratch.in(src[b0:b1], size))
			if s == 0 {
				copy(acc, x)
			} else {
				numeric.Accumulate(op, acc, x)
			}
		}
		out := dst[b0:b1]
		b, copied := scratch.out(out, size)
		copy(elems[T](b), acc)
		if copied {
			copy(out, b)
		}
	}
}

// reduceHalf is reduce for float16 and bfloat16 (d), accumulated in
// float32.
func reduceHalf(d backend.DType, op backend.ReduceOp, dst []byte, srcs [][]byte) {
	if op == backend.Sum && len(srcs) == 2 && aligned(dst, 2) && aligned(srcs[0], 2) && aligned(srcs[1], 2) {
		// Two ranks' sum: widened, added and rounded in one pass, no
		// accumulator.
		numeric.SumHalfPair(d, elems[uint16](dst), elems[uint16](srcs[0]), elems[uint16](srcs[1]))
		return
	}
	var accBuf [chunkElems]float32
	var scratch alignedChunk
	n := len(dst) / 2
	for lo := 0; lo < n; lo += chunkElems {
		m := min(chunkElems, n-lo)
		b0, b1 := lo*2, (lo+m)*2
		acc := accBuf[:m]
		for s, src := range srcs {
			x := elems[uint16](scratch.in(src[b0:b1], 2))
			switch {
			case s > 0:
				numeric.AccumulateHalf(d, op, acc, x)
			case d == backend.Float16:
				numeric.F16sToF32s(acc, x)
			default:
				numeric.BF16sToF32s(acc, x)
			}
		}
		out := dst[b0:b1]
		b, copied := scratch.out(out, 2)
		if d == backend.Float16 {
			numeric.F32sToF16s(elems[uint16](b), acc)
		} else {
			numeric.F32sToBF16s(elems[uint16](b), acc)
		}
		if copied {
			copy(out, b)
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
	if aligned(b, uintptr(size)) {
		return b, false
	}
	off := int(-uintptr(unsafe.Pointer(&a[0])) & 7)
	return a[off : off+len(b)], true
}

// elems views aligned bytes as elements of T.
func elems[T numeric.Accumulator | uint16 | uint64](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(*new(T))))
}
