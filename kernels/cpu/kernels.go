package cpu

import (
	"context"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// Memory resolves device pointers to host bytes. Bytes returns the n bytes
// at p, aliasing the memory (writes are seen by every other view of it), or
// an error when [p, p+n) is not inside one allocation. The fake backend's
// Memory satisfies it.
type Memory interface {
	Bytes(p backend.DevicePtr, n int) ([]byte, error)
}

// Func is a Go kernel: it runs one launch to completion. cfg is the launch
// shape the caller asked for; these kernels run as one block whatever it
// says (channel 0 for all-reduce). A nil result does not mean success: a
// timeout is reported through the status word, as on a device.
type Func = func(ctx context.Context, mem Memory, cfg backend.LaunchConfig, args []backend.Arg) error

// Kernels returns every kernel of the built-in module kernels.ModuleName,
// by kernel name. The map is new on every call.
func Kernels() map[string]Func {
	m := map[string]Func{
		kernels.BarrierKernel:    Barrier,
		kernels.ConfirmKernel:    Confirm,
		kernels.PutSignalKernel:  PutSignal,
		kernels.WaitSignalKernel: WaitSignal,
	}
	for _, d := range backend.DTypes {
		for _, a := range kernels.AllReduceAlgos {
			m[kernels.KernelName(a, d)] = AllReduce(a, d)
		}
		for _, a := range kernels.Movers {
			m[kernels.KernelName(a, d)] = Mover(a, d)
		}
		m[kernels.KernelName(kernels.Divide, d)] = Divide(d)
	}
	return m
}
