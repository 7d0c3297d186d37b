//go:build rocm

package rocm

/*
#cgo nocallback inh_ccl_collective
#include <stdlib.h>
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

	librcclName = "librccl.so.1"
)

// The shims' result spaces, as the shared Go code reads them.
var _ = [1]struct{}{}[C.GPU_CCL_DRIVER_FAILED-gpu.CCLDriverFailed+C.GPU_CCL_ASYNC-gpu.CCLAsync]

// RCCLError is a failed RCCL call: the entry point and the ncclResult_t it
// returned. The backend's errors wrap it under a backend.Code; reach it with
// errors.As to see RCCL's own answer.
type RCCLError = gpu.CCLError

// newRCCL returns the backend's RCCL, not yet opened.
func newRCCL(b *Backend) *gpu.CCL {
	return gpu.NewCCL(gpu.CCLConfig{Backend: Name, Lib: "RCCL", File: librcclName, Env: EnvRCCLLibrary,
		Core: &b.Core, Shims: rcclShims{}, Log: b.log})
}

// rcclShims are the C shims of ccl_impl.h under this backend's names. A
// call's Ctx is the device ordinal, made current with hipSetDevice.
type rcclShims struct{}

func (rcclShims) Load(path string) (int, string) {
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	var msg [loaderErrorBufferSize]C.char
	code := C.inh_ccl_load(p, &msg[0], C.size_t(len(msg)))
	return int(code), C.GoString(&msg[0])
}

func (rcclShims) ErrorString(r int) string {
	if s := C.inh_ccl_error_string(C.int(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

func (rcclShims) LastError() string {
	if s := C.inh_ccl_last_error(); s != nil {
		return C.GoString(s)
	}
	return ""
}

func (rcclShims) Version() (int, int) {
	var v C.int
	r := C.inh_ccl_version(&v)
	return int(v), int(r)
}

func (rcclShims) UniqueID() ([]byte, int) {
	var id [C.GPU_CCL_UNIQUE_ID_BYTES]C.uchar
	if r := C.inh_ccl_unique_id(&id[0]); r != C.GPU_CCL_SUCCESS {
		return nil, int(r)
	}
	return C.GoBytes(unsafe.Pointer(&id[0]), C.int(len(id))), 0
}

func (rcclShims) Init(c gpu.Ctx, world int, id []byte, rank int) (uintptr, int) {
	var h C.uintptr_t
	r := C.inh_ccl_init(C.int(c), C.int(world), (*C.uchar)(unsafe.Pointer(&id[0])), C.int(rank), &h)
	return uintptr(h), int(r)
}

func (rcclShims) Collective(c gpu.Ctx, comm uintptr, kind collective.Op, in, out backend.DevicePtr, count, elemSize, dtype, op,
	root, world int, s gpu.Handle) int {
	return int(C.inh_ccl_collective(C.int(c), C.uintptr_t(comm), C.int(kind), C.uint64_t(in), C.uint64_t(out),
		C.size_t(count), C.size_t(elemSize), C.int(dtype), C.int(op), C.int(root), C.int(world), C.uintptr_t(s)))
}

func (rcclShims) Abort(c gpu.Ctx, comm uintptr) int {
	return int(C.inh_ccl_abort(C.int(c), C.uintptr_t(comm)))
}

func (rcclShims) DriverError(r int) error { return newHIPError("hipSetDevice", r, "", "") }

// Retain returns d's ordinal: a HIP device needs no context held.
func (rcclShims) Retain(d *gpu.Device) (gpu.Ctx, func() error, error) {
	return d.Ctx(), func() error { return nil }, nil
}

// RCCLVersion opens the RCCL library (librccl.so.1, or
// $INTRANODE_RCCL_LIBRARY) and reports its version, "2.20.5". It needs no
// GPU. A missing library is an error matching backend.ErrUnavailable.
func (b *Backend) RCCLVersion() (string, error) { return b.rccl.Version() }

// SetRCCLTimeout bounds creating an RCCL communicator (the store exchange,
// the wait for every rank and ncclCommInitRank together) and releasing one;
// d <= 0 restores the default (collective.DefaultTimeout).
func (b *Backend) SetRCCLTimeout(d time.Duration) { b.rccl.SetTimeout(d) }

// NewInterHost returns the RCCL communicator for cfg
// (collective.InterHostBackend): the step of collective.HostGroups'
// collectives that crosses hosts, made by the first call of every member.
// It fails with backend.ErrUnavailable when librccl cannot be loaded.
func (b *Backend) NewInterHost(ctx context.Context, cfg collective.InterHostConfig) (collective.InterHost, error) {
	return b.rccl.NewInterHost(ctx, cfg)
}

var _ collective.InterHostBackend = (*Backend)(nil)
