//go:build cuda || rocm

package gpu

/*
#cgo nocallback call_collective
#include <stdlib.h>
#include "ccl.h"

static int call_load(const struct gpu_ccl_table *t, const char *path, char *err, size_t n) { return t->load(path, err, n); }
static const char *call_error_string(const struct gpu_ccl_table *t, int r) { return t->error_string(r); }
static const char *call_last_error(const struct gpu_ccl_table *t) { return t->last_error(); }
static int call_version(const struct gpu_ccl_table *t, int *v) { return t->version(v); }
static int call_unique_id(const struct gpu_ccl_table *t, unsigned char *id) { return t->unique_id(id); }
static int call_init(const struct gpu_ccl_table *t, uintptr_t c, int n, const unsigned char *id, int rank, int nonblocking,
                     uintptr_t *comm) {
	return t->init(c, n, id, rank, nonblocking, comm);
}
static int call_async_error(const struct gpu_ccl_table *t, uintptr_t comm, int *state) { return t->async_error(comm, state); }
static int call_collective(const struct gpu_ccl_table *t, uintptr_t c, uintptr_t comm, int kind, uint64_t in, uint64_t out,
                           size_t count, size_t elem_size, int dtype, int op, int root, int nranks, uintptr_t stream) {
	return t->collective(c, comm, kind, in, out, count, elem_size, dtype, op, root, nranks, stream);
}
static int call_abort(const struct gpu_ccl_table *t, uintptr_t c, uintptr_t comm) { return t->abort(c, comm); }
static int call_features(const struct gpu_ccl_table *t) { return t->features(); }
static int call_split(const struct gpu_ccl_table *t, uintptr_t c, uintptr_t parent, int rank, uintptr_t *slot) {
	return t->split(c, parent, rank, slot);
}
static uintptr_t call_child(const struct gpu_ccl_table *t, uintptr_t slot) { return t->child(slot); }
*/
import "C"

import (
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

// The shims' result spaces and id size, as ccl.go reads them.
var _ = [1]struct{}{}[C.GPU_CCL_DRIVER_FAILED-CCLDriverFailed+C.GPU_CCL_ASYNC-CCLAsync+
	C.GPU_CCL_UNIQUE_ID_BYTES-cclUniqueIDBytes+C.GPU_CCL_SUCCESS-cclSuccess+C.GPU_CCL_IN_PROGRESS-cclInProgress+
	C.GPU_CCL_HAS_CONFIG-CCLHasConfig+C.GPU_CCL_HAS_SPLIT-CCLHasSplit]

// cclTable calls a backend's shims through their table (ccl.h).
type cclTable struct {
	t           *C.struct_gpu_ccl_table
	driverError func(r int) error
	retain      func(d *Device) (Ctx, func() error, error)
}

// NewCCLShims returns the CCLShims that call through table, the pointer a
// backend's GPU_FN(ccl_table) returned; driverError is the vendor's error
// for a driver result that a shim failed to make its device current with,
// and retain returns the context a communicator on a device is made in,
// held until its release is called.
func NewCCLShims(table unsafe.Pointer, driverError func(r int) error,
	retain func(d *Device) (Ctx, func() error, error)) CCLShims {
	return cclTable{t: (*C.struct_gpu_ccl_table)(table), driverError: driverError, retain: retain}
}

func (c cclTable) Load(path string) (int, string) {
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	var msg [LoaderErrorBufferSize]C.char
	code := C.call_load(c.t, p, &msg[0], C.size_t(len(msg)))
	return int(code), C.GoString(&msg[0])
}

func (c cclTable) ErrorString(r int) string {
	if s := C.call_error_string(c.t, C.int(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

func (c cclTable) LastError() string {
	if s := C.call_last_error(c.t); s != nil {
		return C.GoString(s)
	}
	return ""
}

func (c cclTable) Version() (int, int) {
	var v C.int
	r := C.call_version(c.t, &v)
	return int(v), int(r)
}

func (c cclTable) UniqueID() ([]byte, int) {
	var id [C.GPU_CCL_UNIQUE_ID_BYTES]C.uchar
	if r := C.call_unique_id(c.t, &id[0]); r != C.GPU_CCL_SUCCESS {
		return nil, int(r)
	}
	return C.GoBytes(unsafe.Pointer(&id[0]), C.int(len(id))), 0
}

func (c cclTable) Init(ctx Ctx, world int, id []byte, rank int, nonBlocking bool) (uintptr, int) {
	var h C.uintptr_t
	nb := C.int(0)
	if nonBlocking {
		nb = 1
	}
	r := C.call_init(c.t, C.uintptr_t(ctx), C.int(world), (*C.uchar)(unsafe.Pointer(&id[0])), C.int(rank), nb, &h)
	return uintptr(h), int(r)
}

func (c cclTable) AsyncError(comm uintptr) (int, int) {
	var state C.int
	r := C.call_async_error(c.t, C.uintptr_t(comm), &state)
	return int(state), int(r)
}

func (c cclTable) Collective(ctx Ctx, comm uintptr, kind collective.Op, in, out backend.DevicePtr, count, elemSize, dtype, op,
	root, world int, s Handle) int {
	return int(C.call_collective(c.t, C.uintptr_t(ctx), C.uintptr_t(comm), C.int(kind), C.uint64_t(in), C.uint64_t(out),
		C.size_t(count), C.size_t(elemSize), C.int(dtype), C.int(op), C.int(root), C.int(world), C.uintptr_t(s)))
}

func (c cclTable) Abort(ctx Ctx, comm uintptr) int {
	return int(C.call_abort(c.t, C.uintptr_t(ctx), C.uintptr_t(comm)))
}

func (c cclTable) Features() int { return int(C.call_features(c.t)) }

func (c cclTable) Split(ctx Ctx, parent uintptr, rank int) (uintptr, int) {
	var slot C.uintptr_t
	r := C.call_split(c.t, C.uintptr_t(ctx), C.uintptr_t(parent), C.int(rank), &slot)
	return uintptr(slot), int(r)
}

func (c cclTable) Child(slot uintptr) uintptr { return uintptr(C.call_child(c.t, C.uintptr_t(slot))) }

func (c cclTable) DriverError(r int) error { return c.driverError(r) }

func (c cclTable) Retain(d *Device) (Ctx, func() error, error) { return c.retain(d) }
