//go:build cuda

package cuda

import (
	"context"
	"fmt"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/collective"
)

// ncclInterHost is an NCCL communicator among the members of a
// collective.InterHostConfig: the step of collective.HostGroups'
// collectives that crosses hosts. It is made as the fallback's are (see
// the NCCL comment in nccl.go): by the first call of every member, its
// unique id exchanged through the config's store, on the device of the
// calling stream, within that call's deadline. NCCL picks its transport:
// across hosts its network one, between processes that NCCL_HOSTID
// places on different "hosts" of one machine its socket transport.
type ncclInterHost struct {
	b *Backend
	g ncclGroup
}

// NewInterHost returns the NCCL communicator for cfg
// (collective.InterHostBackend). It fails with backend.ErrUnavailable
// when libnccl cannot be loaded.
func (b *Backend) NewInterHost(ctx context.Context, cfg collective.InterHostConfig) (collective.InterHost, error) {
	switch {
	case cfg.Store == nil || cfg.Name == "":
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: inter-host communicator: no store or name")
	case cfg.World < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.World:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: inter-host communicator %s: rank %d of %d", cfg.Name, cfg.Rank, cfg.World)
	}
	if err := ctx.Err(); err != nil {
		return nil, backend.Wrap(backend.CodeTimeout, err, "cuda: inter-host communicator "+cfg.Name)
	}
	if err := loadNCCL(b.log); err != nil {
		return nil, fmt.Errorf("cuda: inter-host communicator %s: %w", cfg.Name, err)
	}
	e := &ncclInterHost{b: b}
	e.g = ncclGroup{key: e, store: cfg.Store, name: cfg.Name, rank: cfg.Rank, world: cfg.World}
	return e, nil
}

func (e *ncclInterHost) call(ctx context.Context, s backend.Stream, op collective.Op, in, out backend.DevicePtr, count int,
	dtype backend.DType, red backend.ReduceOp) error {
	st, ok := s.(*gpu.Stream)
	if !ok || st.Device().Core() != &e.b.Core {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: inter-host %v: %T is not a stream of this backend", op, s)
	}
	if err := st.Usable(); err != nil {
		return err
	}
	return e.b.collectiveNCCL(ctx, st, e.g, op, in, out, count, dtype, red, 0)
}

// AllReduce enqueues ncclAllReduce of count elements.
func (e *ncclInterHost) AllReduce(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	return e.call(ctx, s, collective.OpAllReduce, in, out, count, dtype, op)
}

// ReduceScatter enqueues ncclReduceScatter of count elements per member.
func (e *ncclInterHost) ReduceScatter(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	return e.call(ctx, s, collective.OpReduceScatter, in, out, count, dtype, op)
}

// AllGather enqueues ncclAllGather of count elements per member.
func (e *ncclInterHost) AllGather(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType) error {
	return e.call(ctx, s, collective.OpAllGather, in, out, count, dtype, backend.Sum)
}

// Err is the communicator's recorded failure: one NCCL reported
// (ncclCommGetAsyncError after a call) or its creation's.
func (e *ncclInterHost) Err() error {
	e.b.nccl.mu.Lock()
	nc := e.b.nccl.comms[e]
	e.b.nccl.mu.Unlock()
	if nc == nil {
		return nil
	}
	select {
	case <-nc.ready:
		return nc.err()
	default:
		return nil
	}
}

// Close aborts the communicator (ncclCommAbort): no waiting for peers.
func (e *ncclInterHost) Close() error { return e.b.releaseNCCL(e) }

var _ collective.InterHostBackend = (*Backend)(nil)
