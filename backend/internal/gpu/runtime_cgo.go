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

// res is a shim's result and the slot of the entry point it called last,
// returned by value so that no Go memory holds the slot.
typedef struct {
	int r;
	uintptr_t at;
} res;
#define RES(call) do { res o = {0, 0}; o.r = (call); return o; } while (0)
static res call_malloc(rt t, uintptr_t c, size_t n, uint64_t *p) { RES(t->malloc(c, n, p, &o.at)); }
static res call_free(rt t, uintptr_t c, uint64_t p) { RES(t->free(c, p, &o.at)); }
static res call_host_alloc(rt t, uintptr_t c, size_t n, void **h, uint64_t *d) { RES(t->host_alloc(c, n, h, d, &o.at)); }
static res call_host_free(rt t, uintptr_t c, void *h) { RES(t->host_free(c, h, &o.at)); }
static res call_copy_htod(rt t, uintptr_t c, uint64_t d, const void *s, size_t n) { RES(t->copy_htod(c, d, s, n, &o.at)); }
static res call_copy_dtoh(rt t, uintptr_t c, void *d, uint64_t s, size_t n) { RES(t->copy_dtoh(c, d, s, n, &o.at)); }
static res call_copy_dtod(rt t, uintptr_t c, uint64_t d, uint64_t s, size_t n) { RES(t->copy_dtod(c, d, s, n, &o.at)); }
static res call_memset(rt t, uintptr_t c, uint64_t d, unsigned char v, size_t n) { RES(t->memset(c, d, v, n, &o.at)); }
static res call_address_range(rt t, uintptr_t c, uint64_t p, uint64_t *b, size_t *n) { RES(t->address_range(c, p, b, n, &o.at)); }
static res call_stream_create(rt t, uintptr_t c, uintptr_t *s) { RES(t->stream_create(c, s, &o.at)); }
static res call_stream_destroy(rt t, uintptr_t c, uintptr_t s) { RES(t->stream_destroy(c, s, &o.at)); }
static res call_stream_query(rt t, uintptr_t c, uintptr_t s) { RES(t->stream_query(c, s, &o.at)); }
static res call_stream_sync(rt t, uintptr_t c, uintptr_t s) { RES(t->stream_sync(c, s, &o.at)); }
static res call_stream_wait_event(rt t, uintptr_t c, uintptr_t s, uintptr_t e) { RES(t->stream_wait_event(c, s, e, &o.at)); }
static res call_copy_dtod_async(rt t, uintptr_t c, uint64_t d, uint64_t s, size_t n, uintptr_t st) {
	RES(t->copy_dtod_async(c, d, s, n, st, &o.at));
}
static res call_event_create(rt t, uintptr_t c, unsigned int f, uintptr_t *e) { RES(t->event_create(c, f, e, &o.at)); }
static res call_event_record(rt t, uintptr_t c, uintptr_t e, uintptr_t s) { RES(t->event_record(c, e, s, &o.at)); }
static res call_event_query(rt t, uintptr_t c, uintptr_t e) { RES(t->event_query(c, e, &o.at)); }
static res call_event_sync(rt t, uintptr_t c, uintptr_t e) { RES(t->event_sync(c, e, &o.at)); }
static res call_event_elapsed(rt t, uintptr_t c, uintptr_t s, uintptr_t e, float *ms) { RES(t->event_elapsed(c, s, e, ms, &o.at)); }
static res call_event_destroy(rt t, uintptr_t c, uintptr_t e) { RES(t->event_destroy(c, e, &o.at)); }
static res call_module_load(rt t, uintptr_t c, const void *img, uintptr_t *m) { RES(t->module_load(c, img, m, &o.at)); }
static res call_module_function(rt t, uintptr_t c, uintptr_t m, const char *n, uintptr_t *f) {
	RES(t->module_function(c, m, n, f, &o.at));
}
static res call_module_unload(rt t, uintptr_t c, uintptr_t m) { RES(t->module_unload(c, m, &o.at)); }
static res call_launch(rt t, uintptr_t c, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                       unsigned int by, unsigned int bz, unsigned int sh, uintptr_t s, void *p, size_t n, int early) {
	RES(t->launch(c, f, gx, gy, gz, bx, by, bz, sh, s, p, n, early, &o.at));
}
static res call_begin_capture(rt t, uintptr_t c, uintptr_t s) { RES(t->begin_capture(c, s, &o.at)); }
static res call_end_capture(rt t, uintptr_t c, uintptr_t s, uintptr_t *g, uintptr_t *e) { RES(t->end_capture(c, s, g, e, &o.at)); }
static res call_graph_launch(rt t, uintptr_t c, uintptr_t e, uintptr_t s) { RES(t->graph_launch(c, e, s, &o.at)); }
static res call_graph_destroy(rt t, uintptr_t c, uintptr_t g, uintptr_t e) { RES(t->graph_destroy(c, g, e, &o.at)); }
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
// entry point it failed in.
func (n *nativeRuntime) check(r C.res) error {
	if r.r == C.GPU_SUCCESS {
		return nil
	}
	name := "driver call"
	if s := C.call_entry_name(n.t, r.at); s != nil {
		name = C.GoString(s)
	}
	return n.fail(name, int(r.r))
}

// done turns a query's result into done, not done or an error.
func (n *nativeRuntime) done(r C.res) (bool, error) {
	if r.r == C.GPU_ERROR_NOT_READY {
		return false, nil
	}
	return true, n.check(r)
}

func ctx(c Ctx) C.uintptr_t { return C.uintptr_t(c) }

func (n *nativeRuntime) Malloc(c Ctx, size int) (backend.DevicePtr, error) {
	var p C.uint64_t
	r := C.call_malloc(n.t, ctx(c), C.size_t(size), &p)
	return backend.DevicePtr(p), n.check(r)
}

func (n *nativeRuntime) Free(c Ctx, p backend.DevicePtr) error {
	return n.check(C.call_free(n.t, ctx(c), C.uint64_t(p)))
}

func (n *nativeRuntime) HostMalloc(c Ctx, size int) (unsafe.Pointer, backend.DevicePtr, error) {
	var host unsafe.Pointer
	var d C.uint64_t
	r := C.call_host_alloc(n.t, ctx(c), C.size_t(size), &host, &d)
	return host, backend.DevicePtr(d), n.check(r)
}

func (n *nativeRuntime) HostFree(c Ctx, host unsafe.Pointer) error {
	return n.check(C.call_host_free(n.t, ctx(c), host))
}

func (n *nativeRuntime) CopyHtoD(c Ctx, dst backend.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	r := C.call_copy_htod(n.t, ctx(c), C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))
	return n.check(r)
}

func (n *nativeRuntime) CopyDtoH(c Ctx, dst []byte, src backend.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	r := C.call_copy_dtoh(n.t, ctx(c), unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst)))
	return n.check(r)
}

func (n *nativeRuntime) CopyDtoD(c Ctx, dst, src backend.DevicePtr, size int) error {
	if size == 0 {
		return nil
	}
	return n.check(C.call_copy_dtod(n.t, ctx(c), C.uint64_t(dst), C.uint64_t(src), C.size_t(size)))
}

func (n *nativeRuntime) Memset(c Ctx, dst backend.DevicePtr, v byte, size int) error {
	if size == 0 {
		return nil
	}
	return n.check(C.call_memset(n.t, ctx(c), C.uint64_t(dst), C.uchar(v), C.size_t(size)))
}

func (n *nativeRuntime) AddressRange(c Ctx, p backend.DevicePtr) (backend.DevicePtr, int, error) {
	var base C.uint64_t
	var size C.size_t
	r := C.call_address_range(n.t, ctx(c), C.uint64_t(p), &base, &size)
	return backend.DevicePtr(base), int(size), n.check(r)
}

func (n *nativeRuntime) StreamCreate(c Ctx) (Handle, error) {
	var s C.uintptr_t
	r := C.call_stream_create(n.t, ctx(c), &s)
	return Handle(s), n.check(r)
}

func (n *nativeRuntime) StreamDestroy(c Ctx, s Handle) error {
	return n.check(C.call_stream_destroy(n.t, ctx(c), C.uintptr_t(s)))
}

func (n *nativeRuntime) StreamQuery(c Ctx, s Handle) (bool, error) {
	return n.done(C.call_stream_query(n.t, ctx(c), C.uintptr_t(s)))
}

func (n *nativeRuntime) StreamSynchronize(c Ctx, s Handle) error {
	return n.check(C.call_stream_sync(n.t, ctx(c), C.uintptr_t(s)))
}

func (n *nativeRuntime) StreamWaitEvent(c Ctx, s, e Handle) error {
	return n.check(C.call_stream_wait_event(n.t, ctx(c), C.uintptr_t(s), C.uintptr_t(e)))
}

func (n *nativeRuntime) CopyDtoDAsync(c Ctx, dst, src backend.DevicePtr, size int, s Handle) error {
	r := C.call_copy_dtod_async(n.t, ctx(c), C.uint64_t(dst), C.uint64_t(src), C.size_t(size), C.uintptr_t(s))
	return n.check(r)
}

// eventDisableTiming is CU_EVENT_DISABLE_TIMING and hipEventDisableTiming.
const eventDisableTiming = 2

func (n *nativeRuntime) EventCreate(c Ctx, timing bool) (Handle, error) {
	var flags C.uint
	if !timing {
		flags = eventDisableTiming
	}
	var e C.uintptr_t
	r := C.call_event_create(n.t, ctx(c), flags, &e)
	return Handle(e), n.check(r)
}

func (n *nativeRuntime) EventRecord(c Ctx, e, s Handle) error {
	return n.check(C.call_event_record(n.t, ctx(c), C.uintptr_t(e), C.uintptr_t(s)))
}

func (n *nativeRuntime) EventQuery(c Ctx, e Handle) (bool, error) {
	return n.done(C.call_event_query(n.t, ctx(c), C.uintptr_t(e)))
}

func (n *nativeRuntime) EventSynchronize(c Ctx, e Handle) error {
	return n.check(C.call_event_sync(n.t, ctx(c), C.uintptr_t(e)))
}

func (n *nativeRuntime) EventElapsed(c Ctx, start, end Handle) (float32, error) {
	var ms C.float
	r := C.call_event_elapsed(n.t, ctx(c), C.uintptr_t(start), C.uintptr_t(end), &ms)
	return float32(ms), n.check(r)
}

func (n *nativeRuntime) EventDestroy(c Ctx, e Handle) error {
	return n.check(C.call_event_destroy(n.t, ctx(c), C.uintptr_t(e)))
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
	var m C.uintptr_t
	err := n.check(C.call_module_load(n.t, ctx(c), buf, &m))
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
	var f C.uintptr_t
	r := C.call_module_function(n.t, ctx(c), C.uintptr_t(m), cname, &f)
	return Handle(f), n.check(r)
}

func (n *nativeRuntime) ModuleUnload(c Ctx, m Handle) error {
	err := n.check(C.call_module_unload(n.t, ctx(c), C.uintptr_t(m)))
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
	r := C.call_launch(n.t, ctx(c), C.uintptr_t(f),
		C.uint(cfg.Grid.X), C.uint(cfg.Grid.Y), C.uint(cfg.Grid.Z),
		C.uint(cfg.Block.X), C.uint(cfg.Block.Y), C.uint(cfg.Block.Z),
		C.uint(cfg.SharedMem), C.uintptr_t(s), p, C.size_t(len(params)), early)
	return n.check(r)
}

func (n *nativeRuntime) BeginCapture(c Ctx, s Handle) error {
	return n.check(C.call_begin_capture(n.t, ctx(c), C.uintptr_t(s)))
}

func (n *nativeRuntime) EndCapture(c Ctx, s Handle) (Handle, Handle, error) {
	var g, e C.uintptr_t
	r := C.call_end_capture(n.t, ctx(c), C.uintptr_t(s), &g, &e)
	return Handle(g), Handle(e), n.check(r)
}

func (n *nativeRuntime) GraphLaunch(c Ctx, e, s Handle) error {
	return n.check(C.call_graph_launch(n.t, ctx(c), C.uintptr_t(e), C.uintptr_t(s)))
}

func (n *nativeRuntime) GraphDestroy(c Ctx, g, e Handle) error {
	return n.check(C.call_graph_destroy(n.t, ctx(c), C.uintptr_t(g), C.uintptr_t(e)))
}
