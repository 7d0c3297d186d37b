//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#cgo noescape inu_launch
#cgo nocallback inu_launch
#cgo nocallback inu_stream_query
#cgo nocallback inu_stream_wait_event
#cgo nocallback inu_copy_dtod_async
#cgo nocallback inu_event_record
#cgo nocallback inu_event_query
#cgo nocallback inu_graph_launch
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// libcudaName is the driver library the backend opens at run time.
const libcudaName = "libcuda.so.1"

// driverAPI is the CUDA driver as the shared GPU core uses it
// (gpu.Runtime): contexts are primary contexts (gpu.Ctx), streams, events,
// modules, functions and graphs are driver pointers (gpu.Handle). Every
// shim makes the context current on the calling thread itself.
type driverAPI struct{}

// Handles are driver-owned pointers; Go only stores them and passes them
// back to the shims.
type ctxHandle = gpu.Ctx

// CUresult values the backend tests for by number.
const (
	resultSuccess      = 0
	resultInvalidValue = 1
	resultNotReady     = 600
)

// Device attributes (CUdevice_attribute) the backend reads.
const (
	attrCanMapHostMemory     = 19
	attrUnifiedAddressing    = 41
	attrComputeMajor         = 75
	attrComputeMinor         = 76
	attrVirtualMemory        = 102
	attrHandlePOSIXFD        = 103
	attrHandleFabric         = 128
	attrMulticastSupported   = 132
	eventFlagDisableTiming   = 2
	handleTypePOSIXFD        = C.INU_HANDLE_POSIX_FD
	handleTypeFabric         = C.INU_HANDLE_FABRIC
	fabricHandleSize         = 64
	maxAccessDevices         = 64
	pciBusIDBufferSize       = 32
	deviceNameBufferSize     = 256
	minimumDriverDescription = "a driver for CUDA 11.4 or newer"
)

// The driver library is the package's one piece of process-wide mutable
// state. The first Backend that needs it dlopens libcuda.so.1 and resolves
// its entry points into a C table (shim.c), under this mutex, before any
// other shim runs. It is never unloaded: once cuInit has run the driver
// keeps threads and callbacks inside the library, so closing it is unsafe;
// Backends instead release the contexts they retained.
var driverLib struct {
	mu          sync.Mutex
	loaded      bool
	initialized bool
}

// loadDriver opens libcuda.so.1 and initialises the driver API. It returns
// an error matching backend.ErrUnavailable when either fails.
func loadDriver() error { return loadDriverFrom(libcudaName) }

// loadDriverFrom is loadDriver for a given library name or path. Only the
// first successful load counts: later calls reuse it whatever their path.
func loadDriverFrom(lib string) error {
	driverLib.mu.Lock()
	defer driverLib.mu.Unlock()
	if !driverLib.loaded {
		path := C.CString(lib)
		defer C.free(unsafe.Pointer(path))
		var msg [gpu.LoaderErrorBufferSize]C.char
		switch C.inu_load(path, &msg[0], C.size_t(len(msg))) {
		case 0:
			driverLib.loaded = true
		case 1:
			return backend.Errorf(backend.CodeUnavailable, "%s not found: %s", lib, C.GoString(&msg[0]))
		default:
			return backend.Errorf(backend.CodeUnavailable, "%s is too old (intranode needs %s): %s",
				lib, minimumDriverDescription, C.GoString(&msg[0]))
		}
	}
	if !driverLib.initialized {
		if err := check("cuInit", C.inu_init()); err != nil {
			return backend.Wrap(backend.CodeUnavailable, err, "CUDA driver cannot be initialised")
		}
		driverLib.initialized = true
	}
	return nil
}

// check turns a CUresult into nil or a *DriverError naming the entry point.
func check(op string, r C.CUresult) error { return checkResult(op, int(r)) }

// checkResult is check for a CUresult already converted to int.
func checkResult(op string, r int) error {
	if r == resultSuccess {
		return nil
	}
	return newDriverError(op, r)
}

// resultName and resultString ask the driver to describe a CUresult; they
// return "" when it cannot. They only run after a driver call failed, so the
// entry-point table is already filled (the C side also checks).
func resultName(r int) string {
	if s := C.inu_error_name(C.CUresult(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

func resultString(r int) string {
	if s := C.inu_error_string(C.CUresult(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

// stageOp names the entry point a multi-call shim was running when it
// failed; alloc and cpy name the shim's own allocation and copy calls.
func stageOp(stage C.int, alloc, cpy string) string {
	switch stage {
	case C.GPU_STAGE_BIND:
		return "cuCtxSetCurrent"
	case C.GPU_STAGE_GRANULARITY:
		return "cuMemGetAllocationGranularity"
	case C.GPU_STAGE_CREATE:
		return "cuMemCreate"
	case C.GPU_STAGE_IMPORT:
		return "cuMemImportFromShareableHandle"
	case C.GPU_STAGE_RESERVE:
		return "cuMemAddressReserve"
	case C.GPU_STAGE_MAP:
		return "cuMemMap"
	case C.GPU_STAGE_ACCESS:
		return "cuMemSetAccess"
	case C.GPU_STAGE_MEMSET:
		return "cuMemsetD8_v2"
	case C.GPU_STAGE_SYNC:
		return "cuStreamSynchronize"
	case C.GPU_STAGE_EXPORT:
		return "cuMemExportToShareableHandle"
	case C.GPU_STAGE_ALLOC:
		return alloc
	case C.GPU_STAGE_DEVPTR:
		return "cuMemHostGetDevicePointer_v2"
	case C.GPU_STAGE_END_CAPTURE:
		return "cuStreamEndCapture"
	case C.GPU_STAGE_INSTANTIATE:
		return "cuGraphInstantiateWithFlags"
	case C.GPU_STAGE_COPY:
		return cpy
	case C.GPU_STAGE_DEVICE_SYNC:
		return "cuCtxSynchronize"
	case C.GPU_STAGE_UNMAP:
		return "cuMemUnmap"
	case C.GPU_STAGE_ADDRESS_FREE:
		return "cuMemAddressFree"
	case C.GPU_STAGE_RELEASE:
		return "cuMemRelease"
	}
	return fmt.Sprintf("driver call (stage %d)", int(stage))
}

func driverVersion() (int, error) {
	var v C.int
	err := check("cuDriverGetVersion", C.inu_driver_version(&v))
	return int(v), err
}

func deviceCount() (int, error) {
	var n C.int
	err := check("cuDeviceGetCount", C.inu_device_count(&n))
	return int(n), err
}

func deviceGet(ordinal int) (int, error) {
	var d C.int
	err := check("cuDeviceGet", C.inu_device_get(C.int(ordinal), &d))
	return int(d), err
}

func deviceName(dev int) (string, error) {
	var buf [deviceNameBufferSize]C.char
	if err := check("cuDeviceGetName", C.inu_device_name(C.int(dev), &buf[0], C.int(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func deviceAttr(dev, attr int) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.inu_device_attr(C.int(dev), C.int(attr), &v))
	return int(v), err
}

func deviceTotalMem(dev int) (uint64, error) {
	var n C.size_t
	err := check("cuDeviceTotalMem_v2", C.inu_device_total_mem(C.int(dev), &n))
	return uint64(n), err
}

func deviceUUID(dev int) ([16]byte, error) {
	var u [16]C.uchar
	var out [16]byte
	if err := check("cuDeviceGetUuid_v2", C.inu_device_uuid(C.int(dev), &u[0])); err != nil {
		return out, err
	}
	for i := range u {
		out[i] = byte(u[i])
	}
	return out, nil
}

func devicePCIBusID(dev int) (string, error) {
	var buf [pciBusIDBufferSize]C.char
	if err := check("cuDeviceGetPCIBusId", C.inu_device_pci_bus_id(C.int(dev), &buf[0], C.int(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func canAccessPeer(dev, peer int) (bool, error) {
	var can C.int
	err := check("cuDeviceCanAccessPeer", C.inu_can_access_peer(C.int(dev), C.int(peer), &can))
	return can != 0, err
}

func ctxRetain(dev int) (ctxHandle, error) {
	var c C.uintptr_t
	err := check("cuDevicePrimaryCtxRetain", C.inu_ctx_retain(C.int(dev), &c))
	return ctxHandle(c), err
}

func ctxRelease(dev int) error {
	return check("cuDevicePrimaryCtxRelease_v2", C.inu_ctx_release(C.int(dev)))
}

// enablePeer lets ctx's device access peer's memory; already enabled is
// success.
func enablePeer(ctx, peer ctxHandle) error {
	return check("cuCtxEnablePeerAccess", C.inu_enable_peer(C.uintptr_t(ctx), C.uintptr_t(peer)))
}

// Malloc returns zeroed device memory.
func (driverAPI) Malloc(ctx ctxHandle, n int) (backend.DevicePtr, error) {
	var p C.uint64_t
	var stage C.int
	r := C.inu_mem_alloc(C.uintptr_t(ctx), C.size_t(n), &p, &stage)
	return backend.DevicePtr(p), check(stageOp(stage, "cuMemAlloc_v2", ""), r)
}

func (driverAPI) Free(ctx ctxHandle, p backend.DevicePtr) error {
	return check("cuMemFree_v2", C.inu_mem_free(C.uintptr_t(ctx), C.uint64_t(p)))
}

// HostMalloc returns zeroed, pinned, portable host memory mapped into the
// device address space.
func (driverAPI) HostMalloc(ctx ctxHandle, n int) (unsafe.Pointer, backend.DevicePtr, error) {
	var host unsafe.Pointer
	var dptr C.uint64_t
	var stage C.int
	r := C.inu_host_alloc(C.uintptr_t(ctx), C.size_t(n), &host, &dptr, &stage)
	return host, backend.DevicePtr(dptr), check(stageOp(stage, "cuMemHostAlloc", ""), r)
}

func (driverAPI) HostFree(ctx ctxHandle, host unsafe.Pointer) error {
	return check("cuMemFreeHost", C.inu_host_free(C.uintptr_t(ctx), host))
}

func (driverAPI) CopyHtoD(ctx ctxHandle, dst backend.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	var stage C.int
	r := C.inu_copy_htod(C.uintptr_t(ctx), C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), &stage)
	return check(stageOp(stage, "", "cuMemcpyHtoD_v2"), r)
}

func (driverAPI) CopyDtoH(ctx ctxHandle, dst []byte, src backend.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	var stage C.int
	r := C.inu_copy_dtoh(C.uintptr_t(ctx), unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst)), &stage)
	return check(stageOp(stage, "", "cuMemcpyDtoH_v2"), r)
}

func (driverAPI) CopyDtoD(ctx ctxHandle, dst, src backend.DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	var stage C.int
	r := C.inu_copy_dtod(C.uintptr_t(ctx), C.uint64_t(dst), C.uint64_t(src), C.size_t(n), &stage)
	return check(stageOp(stage, "", "cuMemcpyDtoD_v2"), r)
}

func (driverAPI) Memset(ctx ctxHandle, dst backend.DevicePtr, v byte, n int) error {
	if n == 0 {
		return nil
	}
	var stage C.int
	r := C.inu_memset(C.uintptr_t(ctx), C.uint64_t(dst), C.uchar(v), C.size_t(n), &stage)
	return check(stageOp(stage, "", ""), r)
}

func (driverAPI) AddressRange(ctx ctxHandle, p backend.DevicePtr) (backend.DevicePtr, int, error) {
	var base C.uint64_t
	var size C.size_t
	r := C.inu_address_range(C.uintptr_t(ctx), C.uint64_t(p), &base, &size)
	return backend.DevicePtr(base), int(size), check("cuMemGetAddressRange_v2", r)
}

// vmmMapping is memory mapped through the virtual memory management API.
type vmmMapping struct {
	ptr    backend.DevicePtr
	size   int
	handle uint64
}

func (m vmmMapping) c() C.gpu_vmm {
	return C.gpu_vmm{ptr: C.uint64_t(m.ptr), size: C.size_t(m.size), handle: C.uint64_t(m.handle)}
}

func fromC(v C.gpu_vmm) vmmMapping {
	return vmmMapping{ptr: backend.DevicePtr(v.ptr), size: int(v.size), handle: uint64(v.handle)}
}

func accessList(devs []int) ([maxAccessDevices]C.int, C.int) {
	var out [maxAccessDevices]C.int
	n := min(len(devs), maxAccessDevices)
	for i := range n {
		out[i] = C.int(devs[i])
	}
	return out, C.int(n)
}

func vmmGranularity(dev int, handleTypes int) (int, error) {
	var g C.size_t
	err := check("cuMemGetAllocationGranularity", C.inu_vmm_granularity(C.int(dev), C.int(handleTypes), &g))
	return int(g), err
}

// vmmCreate allocates size bytes (rounded up to the granularity) on dev,
// maps them and grants access to the devices in access; the memory is
// zeroed.
func vmmCreate(ctx ctxHandle, dev, handleTypes, size int, access []int) (vmmMapping, error) {
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var stage C.int
	r := C.inu_vmm_create(C.uintptr_t(ctx), C.int(dev), C.int(handleTypes), C.size_t(size), &acc[0], nacc, &out, &stage)
	if err := check(stageOp(stage, "", ""), r); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

// vmmImportFD maps memory exported as a POSIX file descriptor. The
// descriptor stays owned by the caller.
func vmmImportFD(ctx ctxHandle, fd int, size int, access []int) (vmmMapping, error) {
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var stage C.int
	r := C.inu_vmm_import(C.uintptr_t(ctx), handleTypePOSIXFD, C.int(fd), nil, C.size_t(size), &acc[0], nacc, &out, &stage)
	if err := check(stageOp(stage, "", ""), r); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

// vmmImportFabric maps memory exported as a fabric handle.
func vmmImportFabric(ctx ctxHandle, handle []byte, size int, access []int) (vmmMapping, error) {
	var fh [fabricHandleSize]C.uchar
	for i := range fh {
		fh[i] = C.uchar(handle[i])
	}
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var stage C.int
	r := C.inu_vmm_import(C.uintptr_t(ctx), handleTypeFabric, -1, unsafe.Pointer(&fh[0]), C.size_t(size), &acc[0], nacc, &out, &stage)
	if err := check(stageOp(stage, "", ""), r); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

// vmmRelease waits for the context's work, unmaps, frees the address range
// and releases the handle.
func vmmRelease(ctx ctxHandle, m vmmMapping) error {
	cm := m.c()
	var stage C.int
	r := C.inu_vmm_release(C.uintptr_t(ctx), &cm, &stage)
	return check(stageOp(stage, "", ""), r)
}

func vmmExportFD(ctx ctxHandle, m vmmMapping) (int, error) {
	var fd C.int
	err := check("cuMemExportToShareableHandle", C.inu_vmm_export_fd(C.uintptr_t(ctx), C.uint64_t(m.handle), &fd))
	return int(fd), err
}

func vmmExportFabric(ctx ctxHandle, m vmmMapping) ([]byte, error) {
	var fh [fabricHandleSize]C.uchar
	if err := check("cuMemExportToShareableHandle", C.inu_vmm_export_fabric(C.uintptr_t(ctx), C.uint64_t(m.handle), &fh[0])); err != nil {
		return nil, err
	}
	out := make([]byte, fabricHandleSize)
	for i := range fh {
		out[i] = byte(fh[i])
	}
	return out, nil
}

// fabricRoundTrip allocates one granule with a fabric handle on dev,
// exports it and imports it back.
func fabricRoundTrip(ctx ctxHandle, dev int) error {
	var stage C.int
	r := C.inu_fabric_roundtrip(C.uintptr_t(ctx), C.int(dev), &stage)
	return check(stageOp(stage, "", ""), r)
}

func (driverAPI) StreamCreate(ctx ctxHandle) (gpu.Handle, error) {
	var s C.uintptr_t
	err := check("cuStreamCreate", C.inu_stream_create(C.uintptr_t(ctx), &s))
	return gpu.Handle(s), err
}

func (driverAPI) StreamDestroy(ctx ctxHandle, s gpu.Handle) error {
	return check("cuStreamDestroy_v2", C.inu_stream_destroy(C.uintptr_t(ctx), C.uintptr_t(s)))
}

// StreamQuery reports CUDA_ERROR_NOT_READY as not done.
func (driverAPI) StreamQuery(ctx ctxHandle, s gpu.Handle) (bool, error) {
	return queryDone("cuStreamQuery", C.inu_stream_query(C.uintptr_t(ctx), C.uintptr_t(s)))
}

// queryDone turns a query's CUresult into done, not done or an error.
func queryDone(op string, r C.CUresult) (bool, error) {
	if r == resultNotReady {
		return false, nil
	}
	return true, check(op, r)
}

func (driverAPI) StreamSynchronize(ctx ctxHandle, s gpu.Handle) error {
	return check("cuStreamSynchronize", C.inu_stream_sync(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func (driverAPI) StreamWaitEvent(ctx ctxHandle, s, ev gpu.Handle) error {
	return check("cuStreamWaitEvent", C.inu_stream_wait_event(C.uintptr_t(ctx), C.uintptr_t(s), C.uintptr_t(ev)))
}

func (driverAPI) CopyDtoDAsync(ctx ctxHandle, dst, src backend.DevicePtr, n int, s gpu.Handle) error {
	return check("cuMemcpyDtoDAsync_v2", C.inu_copy_dtod_async(C.uintptr_t(ctx), C.uint64_t(dst), C.uint64_t(src), C.size_t(n), C.uintptr_t(s)))
}

// EventCreate makes an event; without timing it is created with
// CU_EVENT_DISABLE_TIMING, which makes recording and waiting cheaper.
func (driverAPI) EventCreate(ctx ctxHandle, timing bool) (gpu.Handle, error) {
	var flags uint
	if !timing {
		flags = eventFlagDisableTiming
	}
	var ev C.uintptr_t
	err := check("cuEventCreate", C.inu_event_create(C.uintptr_t(ctx), C.uint(flags), &ev))
	return gpu.Handle(ev), err
}

func (driverAPI) EventRecord(ctx ctxHandle, ev, s gpu.Handle) error {
	return check("cuEventRecord", C.inu_event_record(C.uintptr_t(ctx), C.uintptr_t(ev), C.uintptr_t(s)))
}

// EventQuery reports CUDA_ERROR_NOT_READY as not done.
func (driverAPI) EventQuery(ctx ctxHandle, ev gpu.Handle) (bool, error) {
	return queryDone("cuEventQuery", C.inu_event_query(C.uintptr_t(ctx), C.uintptr_t(ev)))
}

func (driverAPI) EventSynchronize(ctx ctxHandle, ev gpu.Handle) error {
	return check("cuEventSynchronize", C.inu_event_sync(C.uintptr_t(ctx), C.uintptr_t(ev)))
}

func (driverAPI) EventElapsed(ctx ctxHandle, start, end gpu.Handle) (float32, error) {
	var ms C.float
	err := check("cuEventElapsedTime", C.inu_event_elapsed(C.uintptr_t(ctx), C.uintptr_t(start), C.uintptr_t(end), &ms))
	return float32(ms), err
}

func (driverAPI) EventDestroy(ctx ctxHandle, ev gpu.Handle) error {
	return check("cuEventDestroy_v2", C.inu_event_destroy(C.uintptr_t(ctx), C.uintptr_t(ev)))
}

// ModuleLoad loads a cubin, fatbin or PTX image. PTX must be NUL-terminated,
// so the image is copied into C memory with a NUL appended.
func (driverAPI) ModuleLoad(ctx ctxHandle, image []byte) (gpu.Handle, error) {
	buf := C.malloc(C.size_t(len(image) + 1))
	if buf == nil {
		return 0, backend.Errorf(backend.CodeOutOfMemory, "cannot allocate %d bytes for a module image", len(image)+1)
	}
	defer C.free(buf)
	img := unsafe.Slice((*byte)(buf), len(image)+1)
	copy(img, image)
	img[len(image)] = 0
	var m C.uintptr_t
	err := check("cuModuleLoadData", C.inu_module_load(C.uintptr_t(ctx), buf, &m))
	return gpu.Handle(m), err
}

func (driverAPI) ModuleFunction(ctx ctxHandle, m gpu.Handle, name string) (gpu.Handle, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	err := check("cuModuleGetFunction", C.inu_module_function(C.uintptr_t(ctx), C.uintptr_t(m), cname, &f))
	return gpu.Handle(f), err
}

func (driverAPI) ModuleUnload(ctx ctxHandle, m gpu.Handle) error {
	return check("cuModuleUnload", C.inu_module_unload(C.uintptr_t(ctx), C.uintptr_t(m)))
}

// Launch enqueues fn on s with the packed parameter buffer params, which
// the driver copies before returning. cfg.Early asks for programmatic
// stream serialization; the core sets it only where the device has it.
func (driverAPI) Launch(ctx ctxHandle, fn gpu.Handle, cfg backend.LaunchConfig, s gpu.Handle, params []byte) error {
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	var e int
	if cfg.Early {
		e = 1
	}
	r := C.inu_launch(C.uintptr_t(ctx), C.uintptr_t(fn),
		C.uint(cfg.Grid.X), C.uint(cfg.Grid.Y), C.uint(cfg.Grid.Z),
		C.uint(cfg.Block.X), C.uint(cfg.Block.Y), C.uint(cfg.Block.Z),
		C.uint(cfg.SharedMem), C.uintptr_t(s), p, C.size_t(len(params)), C.int(e))
	if e != 0 {
		return check("cuLaunchKernelEx", r)
	}
	return check("cuLaunchKernel", r)
}

// hasLaunchEx tells whether the driver has cuLaunchKernelEx.
func hasLaunchEx() bool { return C.inu_has_launch_ex() != 0 }

func (driverAPI) BeginCapture(ctx ctxHandle, s gpu.Handle) error {
	return check("cuStreamBeginCapture_v2", C.inu_begin_capture(C.uintptr_t(ctx), C.uintptr_t(s)))
}

// EndCapture ends the capture on s and instantiates the graph.
func (driverAPI) EndCapture(ctx ctxHandle, s gpu.Handle) (gpu.Handle, gpu.Handle, error) {
	var g, e C.uintptr_t
	var stage C.int
	r := C.inu_end_capture(C.uintptr_t(ctx), C.uintptr_t(s), &g, &e, &stage)
	return gpu.Handle(g), gpu.Handle(e), check(stageOp(stage, "", ""), r)
}

func (driverAPI) GraphLaunch(ctx ctxHandle, e, s gpu.Handle) error {
	return check("cuGraphLaunch", C.inu_graph_launch(C.uintptr_t(ctx), C.uintptr_t(e), C.uintptr_t(s)))
}

func (driverAPI) GraphDestroy(ctx ctxHandle, g, e gpu.Handle) error {
	return check("cuGraphExecDestroy", C.inu_graph_destroy(C.uintptr_t(ctx), C.uintptr_t(g), C.uintptr_t(e)))
}
