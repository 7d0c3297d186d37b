//go:build cuda || rocm

package gpu

/*
#cgo noescape call_launch
#cgo nocallback call_launch
#cgo nocallback call_stream_query
#cgo nocallback call_stream_wait_event
#cgo nocallback call_copy_dtod_async
#cgo nocallback call_event_record
#cgo nocallback call_event_query
#cgo nocallback call_graph_launch
#include <stdlib.h>
#include "shim.h"

typedef const struct gpu_runtime *rt;
static int call_malloc(rt t, uintptr_t c, size_t n, uint64_t *p, uintptr_t *at) { return t->malloc(c, n, p, at); }
static int call_free(rt t, uintptr_t c, uint64_t p, uintptr_t *at) { return t->free(c, p, at); }
static int call_host_alloc(rt t, uintptr_t c, size_t n, void **h, uint64_t *d, uintptr_t *at) { return t->host_alloc(c, n, h, d, at); }
static int call_host_free(rt t, uintptr_t c, void *h, uintptr_t *at) { return t->host_free(c, h, at); }
static int call_copy_htod(rt t, uintptr_t c, uint64_t d, const void *s, size_t n, uintptr_t *at) { return t->copy_htod(c, d, s, n, at); }
static int call_copy_dtoh(rt t, uintptr_t c, void *d, uint64_t s, size_t n, uintptr_t *at) { return t->copy_dtoh(c, d, s, n, at); }
static int call_copy_dtod(rt t, uintptr_t c, uint64_t d, uint64_t s, size_t n, uintptr_t *at) { return t->copy_dtod(c, d, s, n, at); }
static int call_memset(rt t, uintptr_t c, uint64_t d, unsigned char v, size_t n, uintptr_t *at) { return t->memset(c, d, v, n, at); }
static int call_address_range(rt t, uintptr_t c, uint64_t p, uint64_t *b, size_t *n, uintptr_t *at) { return t->address_range(c, p, b, n, at); }
static int call_stream_create(rt t, uintptr_t c, uintptr_t *s, uintptr_t *at) { return t->stream_create(c, s, at); }
static int call_stream_destroy(rt t, uintptr_t c, uintptr_t s, uintptr_t *at) { return t->stream_destroy(c, s, at); }
static int call_stream_query(rt t, uintptr_t c, uintptr_t s, uintptr_t *at) { return t->stream_query(c, s, at); }
static int call_stream_sync(rt t, uintptr_t c, uintptr_t s, uintptr_t *at) { return t->stream_sync(c, s, at); }
static int call_stream_wait_event(rt t, uintptr_t c, uintptr_t s, uintptr_t e, uintptr_t *at) { return t->stream_wait_event(c, s, e, at); }
static int call_copy_dtod_async(rt t, uintptr_t c, uint64_t d, uint64_t s, size_t n, uintptr_t st, uintptr_t *at) {
	return t->copy_dtod_async(c, d, s, n, st, at);
}
static int call_event_create(rt t, uintptr_t c, unsigned int f, uintptr_t *e, uintptr_t *at) { return t->event_create(c, f, e, at); }
static int call_event_record(rt t, uintptr_t c, uintptr_t e, uintptr_t s, uintptr_t *at) { return t->event_record(c, e, s, at); }
static int call_event_query(rt t, uintptr_t c, uintptr_t e, uintptr_t *at) { return t->event_query(c, e, at); }
static int call_event_sync(rt t, uintptr_t c, uintptr_t e, uintptr_t *at) { return t->event_sync(c, e, at); }
static int call_event_elapsed(rt t, uintptr_t c, uintptr_t s, uintptr_t e, float *ms, uintptr_t *at) { return t->event_elapsed(c, s, e, ms, at); }
static int call_event_destroy(rt t, uintptr_t c, uintptr_t e, uintptr_t *at) { return t->event_destroy(c, e, at); }
static int call_module_load(rt t, uintptr_t c, const void *img, uintptr_t *m, uintptr_t *at) { return t->module_load(c, img, m, at); }
static int call_module_function(rt t, uintptr_t c, uintptr_t m, const char *n, uintptr_t *f, uintptr_t *at) {
	return t->module_function(c, m, n, f, at);
}
static int call_module_unload(rt t, uintptr_t c, uintptr_t m, uintptr_t *at) { return t->module_unload(c, m, at); }
static int call_launch(rt t, uintptr_t c, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                       unsigned int by, unsigned int bz, unsigned int sh, uintptr_t s, void *p, size_t n, int early, uintptr_t *at) {
	return t->launch(c, f, gx, gy, gz, bx, by, bz, sh, s, p, n, early, at);
}
static int call_begin_capture(rt t, uintptr_t c, uintptr_t s, uintptr_t *at) { return t->begin_capture(c, s, at); }
static int call_end_capture(rt t, uintptr_t c, uintptr_t s, uintptr_t *g, uintptr_t *e, uintptr_t *at) { return t->end_capture(c, s, g, e, at); }
static int call_graph_launch(rt t, uintptr_t c, uintptr_t e, uintptr_t s, uintptr_t *at) { return t->graph_launch(c, e, s, at); }
static int call_graph_destroy(rt t, uintptr_t c, uintptr_t g, uintptr_t e, uintptr_t *at) { return t->graph_destroy(c, g, e, at); }
static const char *call_entry_name(rt t, uintptr_t slot) { return t->entry_name(slot); }
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// nativeRuntime is the Runtime of a backend's C shims (shim_impl.h), called
// through the table its GPU_FN(runtime) returns.
type nativeRuntime struct {
	t    C.rt
	fail func(entry string, r int) error
	// images holds each loaded module's image in C memory until the
	// module is unloaded, when keepImages is set.
	keepImages bool
	mu         sync.Mutex
	images     map[Handle]unsafe.Pointer
}

// NewRuntime returns the Runtime that calls through table, the pointer a
// backend's GPU_FN(runtime) returned. fail is the vendor's error for the
// result r of the named entry point. keepImages keeps each module's image
// in C memory until the module is unloaded, for runtimes that may read it
// after the load has returned (some ROCm releases).
func NewRuntime(table unsafe.Pointer, fail func(entry string, r int) error, keepImages bool) Runtime {
	return &nativeRuntime{t: C.rt(table), fail: fail, keepImages: keepImages, images: map[Handle]unsafe.Pointer{}}
}

// check turns a shim's result into nil or the vendor's error naming the
// entry point at slot at.
func (n *nativeRuntime) check(r C.int, at C.uintptr_t) error {
	if r == C.GPU_SUCCESS {
		return nil
	}
	name := "driver call"
	if s := C.call_entry_name(n.t, at); s != nil {
		name = C.GoString(s)
	}
	return n.fail(name, int(r))
}

// done turns a query's result into done, not done or an error.
func (n *nativeRuntime) done(r C.int, at C.uintptr_t) (bool, error) {
	if r == C.GPU_ERROR_NOT_READY {
		return false, nil
	}
	return true, n.check(r, at)
}

func ctx(c Ctx) C.uintptr_t { return C.uintptr_t(c) }

func (n *nativeRuntime) Malloc(c Ctx, size int) (backend.DevicePtr, error) {
	var p C.uint64_t
	var at C.uintptr_t
	r := C.call_malloc(n.t, ctx(c), C.size_t(size), &p, &at)
	return backend.DevicePtr(p), n.check(r, at)
}

func (n *nativeRuntime) Free(c Ctx, p backend.DevicePtr) error {
	var at C.uintptr_t
	return n.check(C.call_free(n.t, ctx(c), C.uint64_t(p), &at), at)
}

func (n *nativeRuntime) HostMalloc(c Ctx, size int) (unsafe.Pointer, backend.DevicePtr, error) {
	var host unsafe.Pointer
	var d C.uint64_t
	var at C.uintptr_t
	r := C.call_host_alloc(n.t, ctx(c), C.size_t(size), &host, &d, &at)
	return host, backend.DevicePtr(d), n.check(r, at)
}

func (n *nativeRuntime) HostFree(c Ctx, host unsafe.Pointer) error {
	var at C.uintptr_t
	return n.check(C.call_host_free(n.t, ctx(c), host, &at), at)
}

func (n *nativeRuntime) CopyHtoD(c Ctx, dst backend.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	var at C.uintptr_t
	r := C.call_copy_htod(n.t, ctx(c), C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), &at)
	return n.check(r, at)
}

func (n *nativeRuntime) CopyDtoH(c Ctx, dst []byte, src backend.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	var at C.uintptr_t
	r := C.call_copy_dtoh(n.t, ctx(c), unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst)), &at)
	return n.check(r, at)
}

func (n *nativeRuntime) CopyDtoD(c Ctx, dst, src backend.DevicePtr, size int) error {
	if size == 0 {
		return nil
	}
	var at C.uintptr_t
	return n.check(C.call_copy_dtod(n.t, ctx(c), C.uint64_t(dst), C.uint64_t(src), C.size_t(size), &at), at)
}

func (n *nativeRuntime) Memset(c Ctx, dst backend.DevicePtr, v byte, size int) error {
	if size == 0 {
		return nil
	}
	var at C.uintptr_t
	return n.check(C.call_memset(n.t, ctx(c), C.uint64_t(dst), C.uchar(v), C.size_t(size), &at), at)
}

func (n *nativeRuntime) AddressRange(c Ctx, p backend.DevicePtr) (backend.DevicePtr, int, error) {
	var base C.uint64_t
	var size C.size_t
	var at C.uintptr_t
	r := C.call_address_range(n.t, ctx(c), C.uint64_t(p), &base, &size, &at)
	return backend.DevicePtr(base), int(size), n.check(r, at)
}

func (n *nativeRuntime) StreamCreate(c Ctx) (Handle, error) {
	var s, at C.uintptr_t
	r := C.call_stream_create(n.t, ctx(c), &s, &at)
	return Handle(s), n.check(r, at)
}

func (n *nativeRuntime) StreamDestroy(c Ctx, s Handle) error {
	var at C.uintptr_t
	return n.check(C.call_stream_destroy(n.t, ctx(c), C.uintptr_t(s), &at), at)
}

func (n *nativeRuntime) StreamQuery(c Ctx, s Handle) (bool, error) {
	var at C.uintptr_t
	return n.done(C.call_stream_query(n.t, ctx(c), C.uintptr_t(s), &at), at)
}

func (n *nativeRuntime) StreamSynchronize(c Ctx, s Handle) error {
	var at C.uintptr_t
	return n.check(C.call_stream_sync(n.t, ctx(c), C.uintptr_t(s), &at), at)
}

func (n *nativeRuntime) StreamWaitEvent(c Ctx, s, e Handle) error {
	var at C.uintptr_t
	return n.check(C.call_stream_wait_event(n.t, ctx(c), C.uintptr_t(s), C.uintptr_t(e), &at), at)
}

func (n *nativeRuntime) CopyDtoDAsync(c Ctx, dst, src backend.DevicePtr, size int, s Handle) error {
	var at C.uintptr_t
	r := C.call_copy_dtod_async(n.t, ctx(c), C.uint64_t(dst), C.uint64_t(src), C.size_t(size), C.uintptr_t(s), &at)
	return n.check(r, at)
}

// eventDisableTiming is CU_EVENT_DISABLE_TIMING and hipEventDisableTiming.
const eventDisableTiming = 2

func (n *nativeRuntime) EventCreate(c Ctx, timing bool) (Handle, error) {
	var flags C.uint
	if !timing {
		flags = eventDisableTiming
	}
	var e, at C.uintptr_t
	r := C.call_event_create(n.t, ctx(c), flags, &e, &at)
	return Handle(e), n.check(r, at)
}

func (n *nativeRuntime) EventRecord(c Ctx, e, s Handle) error {
	var at C.uintptr_t
	return n.check(C.call_event_record(n.t, ctx(c), C.uintptr_t(e), C.uintptr_t(s), &at), at)
}

func (n *nativeRuntime) EventQuery(c Ctx, e Handle) (bool, error) {
	var at C.uintptr_t
	return n.done(C.call_event_query(n.t, ctx(c), C.uintptr_t(e), &at), at)
}

func (n *nativeRuntime) EventSynchronize(c Ctx, e Handle) error {
	var at C.uintptr_t
	return n.check(C.call_event_sync(n.t, ctx(c), C.uintptr_t(e), &at), at)
}

func (n *nativeRuntime) EventElapsed(c Ctx, start, end Handle) (float32, error) {
	var ms C.float
	var at C.uintptr_t
	r := C.call_event_elapsed(n.t, ctx(c), C.uintptr_t(start), C.uintptr_t(end), &ms, &at)
	return float32(ms), n.check(r, at)
}

func (n *nativeRuntime) EventDestroy(c Ctx, e Handle) error {
	var at C.uintptr_t
	return n.check(C.call_event_destroy(n.t, ctx(c), C.uintptr_t(e), &at), at)
}

// ModuleLoad copies the image into C memory with a NUL appended (PTX must
// end in one), kept until the module is unloaded when keepImages is set.
func (n *nativeRuntime) ModuleLoad(c Ctx, image []byte) (Handle, error) {
	buf := C.malloc(C.size_t(len(image) + 1))
	if buf == nil {
		return 0, backend.Errorf(backend.CodeOutOfMemory, "cannot allocate %d bytes for a module image", len(image)+1)
	}
	img := unsafe.Slice((*byte)(buf), len(image)+1)
	copy(img, image)
	img[len(image)] = 0
	var m, at C.uintptr_t
	err := n.check(C.call_module_load(n.t, ctx(c), buf, &m, &at), at)
	if err != nil || !n.keepImages {
		C.free(buf)
		return Handle(m), err
	}
	n.mu.Lock()
	n.images[Handle(m)] = buf
	n.mu.Unlock()
	return Handle(m), nil
}

func (n *nativeRuntime) ModuleFunction(c Ctx, m Handle, name string) (Handle, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f, at C.uintptr_t
	r := C.call_module_function(n.t, ctx(c), C.uintptr_t(m), cname, &f, &at)
	return Handle(f), n.check(r, at)
}

func (n *nativeRuntime) ModuleUnload(c Ctx, m Handle) error {
	var at C.uintptr_t
	err := n.check(C.call_module_unload(n.t, ctx(c), C.uintptr_t(m), &at), at)
	n.mu.Lock()
	buf := n.images[m]
	delete(n.images, m)
	n.mu.Unlock()
	if buf != nil {
		C.free(buf)
	}
	return err
}

func (n *nativeRuntime) Launch(c Ctx, f Handle, cfg backend.LaunchConfig, s Handle, params []byte) error {
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	var early C.int
	if cfg.Early {
		early = 1
	}
	var at C.uintptr_t
	r := C.call_launch(n.t, ctx(c), C.uintptr_t(f),
		C.uint(cfg.Grid.X), C.uint(cfg.Grid.Y), C.uint(cfg.Grid.Z),
		C.uint(cfg.Block.X), C.uint(cfg.Block.Y), C.uint(cfg.Block.Z),
		C.uint(cfg.SharedMem), C.uintptr_t(s), p, C.size_t(len(params)), early, &at)
	return n.check(r, at)
}

func (n *nativeRuntime) BeginCapture(c Ctx, s Handle) error {
	var at C.uintptr_t
	return n.check(C.call_begin_capture(n.t, ctx(c), C.uintptr_t(s), &at), at)
}

func (n *nativeRuntime) EndCapture(c Ctx, s Handle) (Handle, Handle, error) {
	var g, e, at C.uintptr_t
	r := C.call_end_capture(n.t, ctx(c), C.uintptr_t(s), &g, &e, &at)
	return Handle(g), Handle(e), n.check(r, at)
}

func (n *nativeRuntime) GraphLaunch(c Ctx, e, s Handle) error {
	var at C.uintptr_t
	return n.check(C.call_graph_launch(n.t, ctx(c), C.uintptr_t(e), C.uintptr_t(s), &at), at)
}

func (n *nativeRuntime) GraphDestroy(c Ctx, g, e Handle) error {
	var at C.uintptr_t
	return n.check(C.call_graph_destroy(n.t, ctx(c), C.uintptr_t(g), C.uintptr_t(e), &at), at)
}
