package backend

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Arg is one kernel argument with its C size and alignment. Kernels take their
// arguments as a C struct would lay them out, so every argument keeps its real
// size (a uint32 is 4 bytes, not 8) and is placed at an offset aligned to it.
type Arg struct {
	size int
	bits uint64
}

// Ptr is a device pointer argument (8 bytes).
func Ptr(p DevicePtr) Arg { return Arg{size: 8, bits: uint64(p)} }

// U32 is a 32-bit unsigned argument.
func U32(v uint32) Arg { return Arg{size: 4, bits: uint64(v)} }

// I32 is a 32-bit signed argument.
func I32(v int32) Arg { return Arg{size: 4, bits: uint64(uint32(v))} }

// U64 is a 64-bit unsigned argument.
func U64(v uint64) Arg { return Arg{size: 8, bits: v} }

// I64 is a 64-bit signed argument.
func I64(v int64) Arg { return Arg{size: 8, bits: uint64(v)} }

// F32 is a float argument.
func F32(v float32) Arg { return Arg{size: 4, bits: uint64(math.Float32bits(v))} }

// F64 is a double argument.
func F64(v float64) Arg { return Arg{size: 8, bits: math.Float64bits(v)} }

// Size is the argument's size in bytes, which is also its alignment.
func (a Arg) Size() int { return a.size }

// Ptr returns the argument as a device pointer.
func (a Arg) Ptr() DevicePtr { return DevicePtr(a.bits) }

// U32 returns the low 32 bits.
func (a Arg) U32() uint32 { return uint32(a.bits) }

// I32 returns the low 32 bits as signed.
func (a Arg) I32() int32 { return int32(uint32(a.bits)) }

// U64 returns the 64-bit value.
func (a Arg) U64() uint64 { return a.bits }

// F32 returns the value as a float.
func (a Arg) F32() float32 { return math.Float32frombits(uint32(a.bits)) }

// F64 returns the value as a double.
func (a Arg) F64() float64 { return math.Float64frombits(a.bits) }

// MarshalArgs lays args out as a C struct of the same members would be on a
// little-endian 64-bit machine: each member at the next offset aligned to its
// size. It returns the packed bytes (padded to 8) and each member's offset.
// Backends that launch through a parameter buffer use it directly.
func MarshalArgs(args []Arg) (buf []byte, offsets []int) {
	off := 0
	offsets = make([]int, len(args))
	for i, a := range args {
		off = alignUp(off, a.size)
		offsets[i] = off
		off += a.size
	}
	buf = make([]byte, alignUp(off, 8))
	for i, a := range args {
		switch a.size {
		case 4:
			binary.LittleEndian.PutUint32(buf[offsets[i]:], uint32(a.bits))
		case 8:
			binary.LittleEndian.PutUint64(buf[offsets[i]:], a.bits)
		default:
			panic(fmt.Sprintf("backend: argument %d has size %d", i, a.size))
		}
	}
	return buf, offsets
}

func alignUp(n, a int) int {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}
