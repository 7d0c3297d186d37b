//go:build cuda

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/collective"
)

// NCCL is the CUDA backend's collective library (gpu.CCL, shared with the
// ROCm backend's RCCL): the collective layer's fallback (FallbackAllReduce,
// FallbackMove: sizes its kernels would not do faster, and the vendor
// anchor of `intranode bench`) and the step across hosts of
// collective.HostGroups (NewInterHost). libnccl.so.2 is opened at run time
// with dlopen, like the driver, so building needs no nccl.h and a binary
// starts on machines without NCCL; the calls then fail with an error
// matching backend.ErrUnavailable. How communicators are made, cached and
// aborted is gpu.CCL's comment.

const (
	// EnvNCCLLibrary names the NCCL library to open instead of
	// libnccl.so.2 (a file name searched on the loader path, or a path).
	EnvNCCLLibrary = "INTRANODE_NCCL_LIBRARY"
	// EnvNCCLCreation says how the backend makes its NCCL communicators:
	// "guarded" (the default), "blocking" or "nonblocking"
	// (backend.CCLCreation, SetNCCLCreation).
	EnvNCCLCreation = "INTRANODE_NCCL_CREATION"
	// DefaultNCCLTimeout bounds creating and releasing an NCCL
	// communicator when SetNCCLTimeout has not said otherwise.
	DefaultNCCLTimeout = gpu.DefaultCCLTimeout

	libncclName = "libnccl.so.2"
)

// NCCLError is a failed NCCL call: the entry point and the ncclResult_t it
// returned. The backend's errors wrap it under a backend.Code; reach it with
// errors.As to see NCCL's own answer.
type NCCLError = gpu.CCLError

// newNCCL returns the backend's NCCL, not yet opened: the shims of
// ccl_impl.h under this backend's names, with the device's primary context
// retained for each communicator (NCCL adopts the context current at its
// creation).
func newNCCL(b *Backend) *gpu.CCL {
	retain := func(d *gpu.Device) (gpu.Ctx, func() error, error) {
		ordinal := b.devices[d.Index()].ordinal
		c, err := ctxRetain(ordinal)
		if err != nil {
			return 0, nil, err
		}
		return gpu.Ctx(c), func() error { return ctxRelease(ordinal) }, nil
	}
	shims := gpu.NewCCLShims(unsafe.Pointer(C.inu_ccl_table()),
		func(r int) error { return newDriverError("cuCtxSetCurrent", r) }, retain)
	return gpu.NewCCL(gpu.CCLConfig{Backend: Name, Lib: "NCCL", File: libncclName, Env: EnvNCCLLibrary,
		CreationEnv: EnvNCCLCreation, Core: &b.Core, Shims: shims, Log: b.log})
}

// NCCLVersion opens the NCCL library (libnccl.so.2, or
// $INTRANODE_NCCL_LIBRARY) and reports its version, "2.28.9". It needs no
// GPU. A missing library is an error matching backend.ErrUnavailable.
func (b *Backend) NCCLVersion() (string, error) { return b.nccl.Version() }

// SetNCCLTimeout bounds creating an NCCL communicator (the store exchange,
// the wait for every rank and ncclCommInitRank together) and releasing one;
// d <= 0 restores DefaultNCCLTimeout. It applies to communicators created
// or released afterwards.
func (b *Backend) SetNCCLTimeout(d time.Duration) { b.nccl.SetTimeout(d) }

// SetNCCLCreation says how NCCL communicators created afterwards are
// made ($INTRANODE_NCCL_CREATION sets the initial value; see
// backend.CCLCreation). The default, backend.CCLGuarded (NCCL 2.18 and
// newer), leaves nothing behind when a peer dies during a creation and
// costs calls what blocking communicators do; backend.CCLBlocking keeps a
// creation that waits on a dead peer, with its thread, sockets and
// /dev/shm files, for the process's life; backend.CCLNonBlocking leaves
// nothing behind but costs each eager call a thread NCCL starts for it
// (about 100 µs at 4 ranks on H200).
func (b *Backend) SetNCCLCreation(c backend.CCLCreation) { b.nccl.SetCreation(c) }

// FallbackAllReduce reduces count elements of dtype from in into out (they
// may be equal) with NCCL's all-reduce across c's ranks, enqueued on s, a
// stream of this backend on the rank's device (collective.FallbackAllReducer).
// The first call for c creates c's NCCL communicator: it blocks until every
// rank of c has made its first fallback call too, at most the NCCL
// timeout, and must not happen while s is capturing. Later calls only
// enqueue, and may be captured into a graph. A missing NCCL library is an
// error matching backend.ErrUnavailable, a rank that does not join one
// matching backend.ErrTimeout.
func (b *Backend) FallbackAllReduce(ctx context.Context, s backend.Stream, c *collective.Comm, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	return b.nccl.FallbackAllReduce(ctx, s, c, in, out, count, dtype, op)
}

// FallbackMove runs a reduce-scatter, all-gather, broadcast or all-to-all
// through NCCL for c's ranks (collective.FallbackMover), on the
// communicator FallbackAllReduce uses, with the same first-call rules. An
// all-to-all in place is refused: the comm's kernels serve it.
func (b *Backend) FallbackMove(ctx context.Context, s backend.Stream, c *collective.Comm, op collective.Op, in, out backend.DevicePtr,
	count int, dtype backend.DType, red backend.ReduceOp, root int) error {
	return b.nccl.FallbackMove(ctx, s, c, op, in, out, count, dtype, red, root)
}

// ReleaseFallback aborts the NCCL communicator FallbackAllReduce created
// for c, if any, without waiting for c's peers (work of it still queued is
// cut short: synchronise first). The collective layer calls it when c
// closes; a later fallback call on c would create a new communicator,
// which needs a new rendezvous of c. It waits at most the NCCL timeout.
func (b *Backend) ReleaseFallback(c *collective.Comm) error { return b.nccl.Release(c) }

// NewInterHost returns the NCCL communicator for cfg
// (collective.InterHostBackend): the step of collective.HostGroups'
// collectives that crosses hosts, made by the first call of every member.
// It fails with backend.ErrUnavailable when libnccl cannot be loaded.
func (b *Backend) NewInterHost(ctx context.Context, cfg collective.InterHostConfig) (collective.InterHost, error) {
	return b.nccl.NewInterHost(ctx, cfg)
}

var (
	_ collective.FallbackAllReducer = (*Backend)(nil)
	_ collective.FallbackMover      = (*Backend)(nil)
	_ collective.InterHostBackend   = (*Backend)(nil)
)
