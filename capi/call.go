package capi

import (
	"context"
	"math"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

// Call is one collective call as C passes it, NCCL's conventions
// included: Count is the elements each rank contributes (all-reduce,
// broadcast: the whole buffer; reduce-scatter: the output, recvcount;
// all-gather: the input, sendcount; all-to-all: the block for each peer).
// A call is in place when Send and Recv are laid out as NCCL's in-place
// calls are (Send == Recv, or the rank's block of the larger buffer).
type Call struct {
	Op     collective.Op
	Send   uintptr
	Recv   uintptr
	Count  uint64
	DType  backend.DType
	Red    backend.ReduceOp
	Root   int
	Stream uintptr
}

// check refuses what no rank could run, before anything is looked up.
func (c *Comm) check(call Call) error {
	bad := func(format string, args ...any) error {
		return backend.Errorf(backend.CodeInvalidArgument, "intranode: %v: "+format, append([]any{call.Op}, args...)...)
	}
	switch {
	case call.Op > collective.OpAllToAll:
		return backend.Errorf(backend.CodeInvalidArgument, "intranode: unknown collective %d", int(call.Op))
	case !call.DType.Valid():
		return bad("datatype %d is not one intranode has (float, half, bfloat16, double, int32)", uint32(call.DType))
	case call.Op.Reduces() && !call.Red.Valid():
		return bad("reduction op %d is not one intranode has (sum, max, min, avg)", uint32(call.Red))
	case call.Count > math.MaxInt:
		return bad("count %d does not fit an int", call.Count)
	case call.Op == collective.OpBroadcast && (call.Root < 0 || call.Root >= c.World()):
		return bad("root %d out of range [0, %d)", call.Root, c.World())
	case call.Count > 0 && call.Recv == 0:
		return bad("recvbuff is NULL")
	case call.Count > 0 && call.Send == 0 && !(call.Op == collective.OpBroadcast && call.Root != c.Rank()):
		return bad("sendbuff is NULL")
	}
	return nil
}

// Select returns the path intranode would take for call: an algorithm of
// its own kernels, or collective.None where the vendor library is faster
// (or intranode cannot run the call). It checks the arguments first.
func (c *Comm) Select(call Call) (collective.Algo, error) {
	if err := c.check(call); err != nil {
		return collective.None, err
	}
	if call.Count == 0 {
		return collective.None, nil
	}
	return c.c.SelectReduction(call.Op, int(call.Count), call.DType, call.Red), nil
}

// Do runs call with intranode's choice of path: its own kernels where they
// win, the comm's fallback (NCCL on CUDA, the kernels chunk by chunk on the
// fake) elsewhere. A call of count 0 does nothing.
func (c *Comm) Do(ctx context.Context, call Call) error {
	algo, err := c.Select(call)
	if err != nil {
		return err
	}
	return c.Run(ctx, call, algo)
}

// Run enqueues call on its stream with algo (see Select).
func (c *Comm) Run(ctx context.Context, call Call, algo collective.Algo) error {
	if err := c.check(call); err != nil {
		return err
	}
	if call.Count == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	s, err := c.stream(call.Stream)
	if err != nil {
		return err
	}
	n := int(call.Count)
	send, recv := backend.DevicePtr(call.Send), backend.DevicePtr(call.Recv)
	var w *collective.Work
	// Output is passed straight, not appended to a slice: the closure
	// then stays on the stack (stored into a slice, it escaped to the
	// heap: an allocation a call).
	switch call.Op {
	case collective.OpAllReduce:
		if recv != send {
			w, err = c.c.AllReduce(ctx, s, send, n, call.DType, call.Red, algo, collective.Output(recv))
		} else {
			w, err = c.c.AllReduce(ctx, s, send, n, call.DType, call.Red, algo)
		}
	case collective.OpReduceScatter:
		w, err = c.c.ReduceScatter(ctx, s, send, recv, n, call.DType, call.Red, algo)
	case collective.OpAllGather:
		w, err = c.c.AllGather(ctx, s, send, recv, n, call.DType, algo)
	case collective.OpBroadcast:
		if send == 0 {
			send = recv // a non-root's input is not read
		}
		if recv != send {
			w, err = c.c.Broadcast(ctx, s, send, n, call.DType, call.Root, algo, collective.Output(recv))
		} else {
			w, err = c.c.Broadcast(ctx, s, send, n, call.DType, call.Root, algo)
		}
	case collective.OpAllToAll:
		w, err = c.c.AllToAll(ctx, s, send, recv, n, call.DType, algo)
	}
	if err != nil {
		return err
	}
	return w.Close()
}
