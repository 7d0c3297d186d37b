//go:build rocm

package rocm

/*
#include "hip_shim.h"
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

// RCCL is the ROCm backend's collective library (gpu.CCL, shared with the
// CUDA backend's NCCL, whose API it has): the step across hosts of
// collective.HostGroups (NewInterHost). librccl.so.1 is opened at run time
// with dlopen on first use, so building needs no rccl.h and a binary starts
// on machines without RCCL; NewInterHost then fails with an error matching
// backend.ErrUnavailable. RCCL reads NCCL's environment variables
// (NCCL_HOSTID, NCCL_SOCKET_IFNAME, …). How communicators are made, cached
// and aborted is gpu.CCL's comment. RCCL does not serve as the collective
// layer's fallback on ROCm: no measurement has yet said where it would be
// faster than the backend's kernels.

const (
	// EnvRCCLLibrary names the RCCL library to open instead of
	// librccl.so.1 (a file name searched on the loader path, or a path).
	EnvRCCLLibrary = "INTRANODE_RCCL_LIBRARY"
	// EnvRCCLCreation says how the backend makes its RCCL communicators:
	// "guarded" (the default), "blocking" or "nonblocking"
	// (backend.CCLCreation, SetRCCLCreation).
	EnvRCCLCreation = "INTRANODE_RCCL_CREATION"

	librcclName = "librccl.so.1"
)

// RCCLError is a failed RCCL call: the entry point and the ncclResult_t it
// returned. The backend's errors wrap it under a backend.Code; reach it with
// errors.As to see RCCL's own answer.
type RCCLError = gpu.CCLError

// newRCCL returns the backend's RCCL, not yet opened: the shims of
// ccl_impl.h under this backend's names. A call's context is the device
// ordinal, made current with hipSetDevice; a HIP device needs no context
// held.
func newRCCL(b *Backend) *gpu.CCL {
	retain := func(d *gpu.Device) (gpu.Ctx, func() error, error) { return d.Ctx(), func() error { return nil }, nil }
	shims := gpu.NewCCLShims(unsafe.Pointer(C.inh_ccl_table()),
		func(r int) error { return newHIPError("hipSetDevice", r, "", "") }, retain)
	return gpu.NewCCL(gpu.CCLConfig{Backend: Name, Lib: "RCCL", File: librcclName, Env: EnvRCCLLibrary,
		CreationEnv: EnvRCCLCreation, Core: &b.Core, Shims: shims, Log: b.log})
}

// RCCLVersion opens the RCCL library (librccl.so.1, or
// $INTRANODE_RCCL_LIBRARY) and reports its version, "2.20.5". It needs no
// GPU. A missing library is an error matching backend.ErrUnavailable.
func (b *Backend) RCCLVersion() (string, error) { return b.rccl.Version() }

// SetRCCLTimeout bounds creating an RCCL communicator (the store exchange,
// the wait for every rank and ncclCommInitRank together) and releasing one;
// d <= 0 restores the default (collective.DefaultTimeout).
func (b *Backend) SetRCCLTimeout(d time.Duration) { b.rccl.SetTimeout(d) }

// SetRCCLCreation says how RCCL communicators created afterwards are
// made ($INTRANODE_RCCL_CREATION sets the initial value), as
// SetNCCLCreation does on CUDA.
func (b *Backend) SetRCCLCreation(c backend.CCLCreation) { b.rccl.SetCreation(c) }

// NewInterHost returns the RCCL communicator for cfg
// (collective.InterHostBackend): the step of collective.HostGroups'
// collectives that crosses hosts, made by the first call of every member.
// It fails with backend.ErrUnavailable when librccl cannot be loaded.
func (b *Backend) NewInterHost(ctx context.Context, cfg collective.InterHostConfig) (collective.InterHost, error) {
	return b.rccl.NewInterHost(ctx, cfg)
}

var _ collective.InterHostBackend = (*Backend)(nil)
