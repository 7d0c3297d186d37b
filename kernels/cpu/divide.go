package cpu

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/kernels"
)

// Divide returns the division kernel kernels.KernelName(kernels.Divide,
// dtype): Output[i] = Input[i] / World, as kernels.Divide documents it,
// with the device kernel's rounding (float16 and bfloat16 divided in
// float32 and rounded once, int32 toward zero). Input and Output are equal
// or disjoint.
func Divide(dtype backend.DType) Func {
	return collectiveKernel(kernels.Divide, dtype, setupDivide)
}

// divide is one resolved division launch.
type divide struct {
	dtype   backend.DType
	world   int
	in, out []byte
}

func setupDivide(ctx context.Context, mem Memory, a kernels.AllReduceArgs, _ kernels.Algo,
	dtype backend.DType, name string) (*divide, error) {
	l := &launch{ctx: ctx, kernel: name} // the status word and bad-argument reports only
	if err := l.resolveStatus(mem, a.Status); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, backend.Wrap(backend.CodeClosed, err, name)
	}
	size := dtype.Size()
	switch {
	case a.DType != dtype:
		return nil, l.badArgs("dtype %v, but the kernel handles %v", a.DType, dtype)
	case a.World < 1 || a.World > kernels.MaxRanks:
		return nil, l.badArgs("divisor (world) %d must be 1..%d", a.World, kernels.MaxRanks)
	case a.Count > uint64(math.MaxInt/size):
		return nil, l.badArgs("count %d too large", a.Count)
	case a.Count > 0 && (a.Input%backend.DevicePtr(size) != 0 || a.Output%backend.DevicePtr(size) != 0):
		return nil, l.badArgs("input %#x or output %#x not aligned to the %d-byte element", uint64(a.Input), uint64(a.Output), size)
	}
	k := &divide{dtype: dtype, world: int(a.World)}
	if a.Count == 0 {
		return k, nil
	}
	n := int(a.Count) * size
	var err error
	if k.in, err = mem.Bytes(a.Input, n); err != nil {
		return nil, l.badArgsWrap(err, "input %#x, %d bytes", uint64(a.Input), n)
	}
	if k.out, err = mem.Bytes(a.Output, n); err != nil {
		return nil, l.badArgsWrap(err, "output %#x, %d bytes", uint64(a.Output), n)
	}
	return k, nil
}

func (k *divide) run() error {
	le := binary.LittleEndian
	switch k.dtype {
	case backend.Float32:
		w := float32(k.world)
		for i := 0; i < len(k.in); i += 4 {
			le.PutUint32(k.out[i:], math.Float32bits(math.Float32frombits(le.Uint32(k.in[i:]))/w))
		}
	case backend.Float64:
		w := float64(k.world)
		for i := 0; i < len(k.in); i += 8 {
			le.PutUint64(k.out[i:], math.Float64bits(math.Float64frombits(le.Uint64(k.in[i:]))/w))
		}
	case backend.Int32:
		w := int32(k.world)
		for i := 0; i < len(k.in); i += 4 {
			le.PutUint32(k.out[i:], uint32(int32(le.Uint32(k.in[i:]))/w))
		}
	case backend.Float16, backend.BFloat16:
		up, down := numeric.F16ToF32, numeric.F32ToF16
		if k.dtype == backend.BFloat16 {
			up, down = numeric.BF16ToF32, numeric.F32ToBF16
		}
		w := float32(k.world)
		for i := 0; i < len(k.in); i += 2 {
			le.PutUint16(k.out[i:], down(up(le.Uint16(k.in[i:]))/w))
		}
	}
	return nil
}
