package backend

import (
	"fmt"
	"math"
)

// DType is an element type the collectives understand.
type DType uint32

// Element types. The values are part of the kernel ABI (see package kernels)
// and must not change.
const (
	Float32  DType = 0
	Float16  DType = 1
	BFloat16 DType = 2
	Float64  DType = 3
	Int32    DType = 4
)

// DTypes lists every supported type in ABI order.
var DTypes = []DType{Float32, Float16, BFloat16, Float64, Int32}

// dtypeSizes are the element sizes in bytes, by value.
var dtypeSizes = [...]int{Float32: 4, Float16: 2, BFloat16: 2, Float64: 8, Int32: 4}

// Size is the element size in bytes (0 for an unknown type).
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// Bytes returns the size in bytes of count elements of d, and false when
// count is negative, d unknown, or the size does not fit an int: every
// place a count from a caller meets a byte size goes through it, so that an
// overflowing count is refused instead of wrapping into a small size.
func (d DType) Bytes(count int) (int, bool) {
	size := d.Size()
	if size == 0 || count < 0 || count > math.MaxInt/size {
		return 0, false
	}
	return count * size, true
}

// Valid reports whether d is a known type.
func (d DType) Valid() bool { return d.Size() != 0 }

// dtypeNames are the String names, by value.
var dtypeNames = [...]string{Float32: "float", Float16: "half", BFloat16: "bfloat16", Float64: "double", Int32: "int32"}

// String returns the short name used on the command line and in tables.
func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint32(d))
}

// ParseDType accepts the String names and the common aliases (f32, fp16, bf16…).
func ParseDType(s string) (DType, error) {
	switch s {
	case "float", "float32", "f32", "fp32":
		return Float32, nil
	case "half", "float16", "f16", "fp16":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "double", "float64", "f64", "fp64":
		return Float64, nil
	case "int32", "int", "i32":
		return Int32, nil
	}
	return 0, Errorf(CodeInvalidArgument, "unknown dtype %q", s)
}

// ReduceOp is a reduction operator.
type ReduceOp uint32

// Reduction operators. Sum, Max and Min are part of the kernel ABI (the
// kernels reduce with them); Avg is not: it is the sum divided by the
// number of ranks, which the comm computes as a Sum followed by the
// division kernel (kernels.Divide), and which a vendor library computes
// itself (NCCL's ncclAvg).
const (
	Sum ReduceOp = 0
	Max ReduceOp = 1
	Min ReduceOp = 2
	Avg ReduceOp = 3
)

// reduceOpNames are the String names, by value.
var reduceOpNames = [...]string{Sum: "sum", Max: "max", Min: "min", Avg: "avg"}

// String returns the name used in tables ("sum", "max", "min", "avg").
func (o ReduceOp) String() string {
	if o.Valid() {
		return reduceOpNames[o]
	}
	return fmt.Sprintf("op(%d)", uint32(o))
}

// Valid reports whether o is a known operator.
func (o ReduceOp) Valid() bool { return o <= Avg }

// Kernel reports whether the kernels reduce with o itself (Sum, Max, Min);
// Avg is a Sum and a division.
func (o ReduceOp) Kernel() bool { return o <= Min }

// Reduced is the operator the kernels reduce with for o: Sum for Avg, o
// itself otherwise.
func (o ReduceOp) Reduced() ReduceOp {
	if o == Avg {
		return Sum
	}
	return o
}

// ParseReduceOp parses "sum", "max", "min" or "avg".
func ParseReduceOp(s string) (ReduceOp, error) {
	switch s {
	case "sum":
		return Sum, nil
	case "max":
		return Max, nil
	case "min":
		return Min, nil
	case "avg":
		return Avg, nil
	}
	return 0, Errorf(CodeInvalidArgument, "unknown reduce op %q", s)
}
