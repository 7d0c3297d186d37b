//go:build rocm

package rocm

/*
#cgo LDFLAGS: -ldl
#cgo noescape inh_launch
#cgo nocallback inh_launch
#cgo nocallback inh_stream_query
#cgo nocallback inh_stream_wait_event
#cgo nocallback inh_copy_dtod_async
#cgo nocallback inh_event_record
#cgo nocallback inh_event_query
#cgo nocallback inh_graph_launch
#include <stdlib.h>
#include "hip_shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// libHIPName is the HIP runtime library the backend opens at run time.
const libHIPName = "libamdhip64.so"

// EnvHIPLibrary names the environment variable that, when set, is the only
// HIP runtime library the backend tries (a path or a name for dlopen).
const EnvHIPLibrary = "INTRANODE_HIP_LIBRARY"

// Buffer sizes of the string-returning entry points.
const (
	nameBufferSize  = 256
	busIDBufferSize = 64
	// minimumRuntime is what the required entry points need.
	minimumRuntime = "HIP 5.2 or newer"
	// vmmRuntime is the first runtime version whose virtual memory
	// management structures match the ROCm 6 declarations in hip_shim.c.
	vmmRuntime = 60000000
)

// hipLibraryCandidates lists what the loader tries, in order: the
// development symlink, the runtime sonames of ROCm 7, 6 and 5 (Debian's
// package ships only those), then the ROCm install tree.
func hipLibraryCandidates() []string {
	if lib := os.Getenv(EnvHIPLibrary); lib != "" {
		return []string{lib}
	}
	out := []string{libHIPName, libHIPName + ".7", libHIPName + ".6", libHIPName + ".5"}
	if root := os.Getenv("ROCM_PATH"); root != "" {
		out = append(out, filepath.Join(root, "lib", libHIPName))
	}
	return append(out, filepath.Join("/opt/rocm/lib", libHIPName))
}

// The runtime library is the package's process-wide state (with the SMI
// library and the registry of IPC exports). The first Backend that needs it
// dlopens it and resolves its entry points into a C table (hip_shim.c),
// under this mutex, before any other shim runs. It is never unloaded: the
// runtime keeps threads inside it once hipInit has run.
var hipLib struct {
	mu      sync.Mutex
	rt      *cgoHIP
	initErr error
	inited  bool
}

// loadHIP opens the HIP runtime, trying hipLibraryCandidates in order, and
// returns it. The error matches backend.ErrUnavailable; its message names
// the library ("libamdhip64.so not found: …").
func loadHIP() (hipRuntime, error) { return loadHIPFrom(hipLibraryCandidates()) }

// loadHIPFrom is loadHIP over the given candidates. Only the first
// successful load counts: later calls reuse it whatever their candidates.
func loadHIPFrom(candidates []string) (hipRuntime, error) {
	hipLib.mu.Lock()
	defer hipLib.mu.Unlock()
	if hipLib.rt != nil {
		return hipLib.rt, nil
	}
	var notFound, tooOld []string
	for _, lib := range candidates {
		path := C.CString(lib)
		var msg [gpu.LoaderErrorBufferSize]C.char
		r := C.inh_load(path, &msg[0], C.size_t(len(msg)))
		C.free(unsafe.Pointer(path))
		switch r {
		case 0:
			rt := &cgoHIP{lib: lib}
			var v C.int
			if C.inh_runtime_version(&v) == C.INH_SUCCESS {
				rt.runtimeVersion = int(v)
			}
			rt.vmm = C.inh_has_vmm() != 0 && rt.runtimeVersion >= vmmRuntime
			hipLib.rt = rt
			return rt, nil
		case 1:
			notFound = append(notFound, C.GoString(&msg[0]))
		default:
			tooOld = append(tooOld, fmt.Sprintf("%s is too old (intranode needs %s): %s", lib, minimumRuntime, C.GoString(&msg[0])))
		}
	}
	if len(tooOld) > 0 {
		return nil, backend.Errorf(backend.CodeUnavailable, "%s", tooOld[0])
	}
	first := ""
	if len(notFound) > 0 {
		first = notFound[0]
	}
	also := ""
	if len(candidates) > 1 {
		also = fmt.Sprintf(" (also tried %s)", strings.Join(candidates[1:], ", "))
	}
	return nil, backend.Errorf(backend.CodeUnavailable, "%s not found: %s%s", candidates[0], first, also)
}

// cgoHIP is the hipRuntime of libamdhip64.so.
type cgoHIP struct {
	lib            string
	runtimeVersion int
	vmm            bool
}

// check turns a hipError_t (inh_result) into nil or a *HIPError naming the entry point.
func check(op string, r C.inh_result) error {
	if r == C.INH_SUCCESS {
		return nil
	}
	return resultError(op, int(r))
}

// resultError asks the runtime to describe r.
func resultError(op string, r int) *HIPError {
	var name, desc string
	if s := C.inh_error_name(C.inh_result(r)); s != nil {
		name = C.GoString(s)
	}
	if s := C.inh_error_string(C.inh_result(r)); s != nil {
		desc = C.GoString(s)
	}
	return newHIPError(op, r, name, desc)
}

// stageOp names the entry point a multi-call shim was running when it
// failed; alloc and cpy name the shim's own allocation and copy calls.
func stageOp(stage C.int, alloc, cpy string) string {
	switch stage {
	case C.GPU_STAGE_BIND:
		return "hipSetDevice"
	case C.GPU_STAGE_ALLOC:
		return alloc
	case C.GPU_STAGE_MEMSET:
		return "hipMemsetD8"
	case C.GPU_STAGE_SYNC:
		return "hipStreamSynchronize"
	case C.GPU_STAGE_DEVPTR:
		return "hipHostGetDevicePointer"
	case C.GPU_STAGE_COPY:
		return cpy
	case C.GPU_STAGE_GRANULARITY:
		return "hipMemGetAllocationGranularity"
	case C.GPU_STAGE_CREATE:
		return "hipMemCreate"
	case C.GPU_STAGE_IMPORT:
		return "hipMemImportFromShareableHandle"
	case C.GPU_STAGE_RESERVE:
		return "hipMemAddressReserve"
	case C.GPU_STAGE_MAP:
		return "hipMemMap"
	case C.GPU_STAGE_ACCESS:
		return "hipMemSetAccess"
	case C.GPU_STAGE_DEVICE_SYNC:
		return "hipDeviceSynchronize"
	case C.GPU_STAGE_UNMAP:
		return "hipMemUnmap"
	case C.GPU_STAGE_ADDRESS_FREE:
		return "hipMemAddressFree"
	case C.GPU_STAGE_RELEASE:
		return "hipMemRelease"
	case C.GPU_STAGE_END_CAPTURE:
		return "hipStreamEndCapture"
	case C.GPU_STAGE_INSTANTIATE:
		return "hipGraphInstantiate"
	}
	return fmt.Sprintf("HIP call (stage %d)", int(stage))
}

func (h *cgoHIP) Library() string { return h.lib }

func (h *cgoHIP) Init() error {
	hipLib.mu.Lock()
	defer hipLib.mu.Unlock()
	if !hipLib.inited {
		hipLib.initErr = check("hipInit", C.inh_init())
		hipLib.inited = true
	}
	return hipLib.initErr
}

func (h *cgoHIP) Version() (int, int, error) {
	var rt, drv C.int
	if err := check("hipRuntimeGetVersion", C.inh_runtime_version(&rt)); err != nil {
		return 0, 0, err
	}
	if err := check("hipDriverGetVersion", C.inh_driver_version(&drv)); err != nil {
		return int(rt), 0, err
	}
	return int(rt), int(drv), nil
}

func (h *cgoHIP) DeviceCount() (int, error) {
	var n C.int
	err := check("hipGetDeviceCount", C.inh_device_count(&n))
	return int(n), err
}

func (h *cgoHIP) DeviceName(dev int) (string, error) {
	var buf [nameBufferSize]C.char
	if err := check("hipDeviceGetName", C.inh_device_name(C.int(dev), &buf[0], C.int(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (h *cgoHIP) DevicePCIBusID(dev int) (string, error) {
	var buf [busIDBufferSize]C.char
	if err := check("hipDeviceGetPCIBusId", C.inh_device_pci_bus_id(C.int(dev), &buf[0], C.int(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (h *cgoHIP) DeviceTotalMem(dev int) (uint64, error) {
	var n C.size_t
	err := check("hipDeviceTotalMem", C.inh_device_total_mem(C.int(dev), &n))
	return uint64(n), err
}

func (h *cgoHIP) DeviceUUID(dev int) ([16]byte, bool, error) {
	var out [16]byte
	if C.inh_has_uuid() == 0 {
		return out, false, nil
	}
	var u [16]C.uchar
	if err := check("hipDeviceGetUuid", C.inh_device_uuid(C.int(dev), &u[0])); err != nil {
		return out, true, err
	}
	for i := range u {
		out[i] = byte(u[i])
	}
	return out, true, nil
}

func (h *cgoHIP) DeviceAttribute(dev int, attr deviceAttribute) (int, error) {
	var v C.int
	err := check("hipDeviceGetAttribute", C.inh_device_attr(C.int(dev), C.int(attr), &v))
	return int(v), err
}

func (h *cgoHIP) CanAccessPeer(dev, peer int) (bool, error) {
	var can C.int
	err := check("hipDeviceCanAccessPeer", C.inh_can_access_peer(C.int(dev), C.int(peer), &can))
	return can != 0, err
}

func (h *cgoHIP) EnablePeerAccess(dev, peer int) error {
	err := check("hipDeviceEnablePeerAccess", C.inh_enable_peer(C.int(dev), C.int(peer)))
	if isHIP(err, hipErrorPeerAlreadyOn) {
		return nil
	}
	return err
}

func (h *cgoHIP) Malloc(c gpu.Ctx, n int) (backend.DevicePtr, error) {
	dev := int(c)
	var p C.uint64_t
	var stage C.int
	r := C.inh_malloc(C.int(dev), C.size_t(n), 0, 0, &p, &stage)
	return backend.DevicePtr(p), check(stageOp(stage, "hipMalloc", ""), r)
}

func (h *cgoHIP) MallocShareable(dev, n int, t memoryType) (backend.DevicePtr, error) {
	flags := C.uint(C.INH_DEVICE_MALLOC_UNCACHED)
	if t == memFineGrained {
		flags = C.INH_DEVICE_MALLOC_FINEGRAINED
	}
	var p C.uint64_t
	var stage C.int
	r := C.inh_malloc(C.int(dev), C.size_t(n), flags, 1, &p, &stage)
	return backend.DevicePtr(p), check(stageOp(stage, "hipExtMallocWithFlags", ""), r)
}

func (h *cgoHIP) Free(c gpu.Ctx, p backend.DevicePtr) error {
	dev := int(c)
	return check("hipFree", C.inh_free(C.int(dev), C.uint64_t(p)))
}

func (h *cgoHIP) HostMalloc(c gpu.Ctx, n int) (unsafe.Pointer, backend.DevicePtr, error) {
	dev := int(c)
	var host unsafe.Pointer
	var dptr C.uint64_t
	var stage C.int
	r := C.inh_host_alloc(C.int(dev), C.size_t(n), &host, &dptr, &stage)
	return host, backend.DevicePtr(dptr), check(stageOp(stage, "hipHostMalloc", ""), r)
}

func (h *cgoHIP) HostFree(c gpu.Ctx, host unsafe.Pointer) error {
	dev := int(c)
	return check("hipHostFree", C.inh_host_free(C.int(dev), host))
}

func (h *cgoHIP) CopyHtoD(c gpu.Ctx, dst backend.DevicePtr, src []byte) error {
	dev := int(c)
	if len(src) == 0 {
		return nil
	}
	var stage C.int
	r := C.inh_copy_htod(C.int(dev), C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), &stage)
	return check(stageOp(stage, "", "hipMemcpyHtoD"), r)
}

func (h *cgoHIP) CopyDtoH(c gpu.Ctx, dst []byte, src backend.DevicePtr) error {
	dev := int(c)
	if len(dst) == 0 {
		return nil
	}
	var stage C.int
	r := C.inh_copy_dtoh(C.int(dev), unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst)), &stage)
	return check(stageOp(stage, "", "hipMemcpyDtoH"), r)
}

func (h *cgoHIP) CopyDtoD(c gpu.Ctx, dst, src backend.DevicePtr, n int) error {
	dev := int(c)
	if n == 0 {
		return nil
	}
	var stage C.int
	r := C.inh_copy_dtod(C.int(dev), C.uint64_t(dst), C.uint64_t(src), C.size_t(n), &stage)
	return check(stageOp(stage, "", "hipMemcpyDtoD"), r)
}

func (h *cgoHIP) Memset(c gpu.Ctx, dst backend.DevicePtr, v byte, n int) error {
	dev := int(c)
	if n == 0 {
		return nil
	}
	var stage C.int
	r := C.inh_memset(C.int(dev), C.uint64_t(dst), C.uchar(v), C.size_t(n), &stage)
	return check(stageOp(stage, "", ""), r)
}

func (h *cgoHIP) AddressRange(c gpu.Ctx, p backend.DevicePtr) (backend.DevicePtr, int, error) {
	var base C.uint64_t
	var size C.size_t
	r := C.inh_address_range(C.int(int(c)), C.uint64_t(p), &base, &size)
	return backend.DevicePtr(base), int(size), check("hipMemGetAddressRange", r)
}

func (h *cgoHIP) IPCGetHandle(dev int, p backend.DevicePtr) (ipcHandle, error) {
	var raw [ipcHandleSize]C.uchar
	var out ipcHandle
	if err := check("hipIpcGetMemHandle", C.inh_ipc_get(C.int(dev), C.uint64_t(p), &raw[0])); err != nil {
		return out, err
	}
	for i := range raw {
		out[i] = byte(raw[i])
	}
	return out, nil
}

// ipcOpenFlags is hipIpcMemLazyEnablePeerAccess: 0x1 in ROCm 6 (which
// insists on it), 0 in the ROCm 5 headers (whose runtime ignores it).
func (h *cgoHIP) ipcOpenFlags() C.uint {
	if h.runtimeVersion >= vmmRuntime {
		return C.INH_IPC_LAZY_ENABLE_PEER_ACCESS
	}
	return 0
}

func (h *cgoHIP) IPCOpenHandle(dev int, hd ipcHandle) (backend.DevicePtr, error) {
	var raw [ipcHandleSize]C.uchar
	for i := range hd {
		raw[i] = C.uchar(hd[i])
	}
	var p C.uint64_t
	err := check("hipIpcOpenMemHandle", C.inh_ipc_open(C.int(dev), &raw[0], h.ipcOpenFlags(), &p))
	return backend.DevicePtr(p), err
}

func (h *cgoHIP) IPCCloseHandle(dev int, p backend.DevicePtr) error {
	return check("hipIpcCloseMemHandle", C.inh_ipc_close(C.int(dev), C.uint64_t(p)))
}

func (h *cgoHIP) HasVMM() bool { return h.vmm }

func memTypeC(t memoryType) C.int {
	if t == memUncached {
		return C.INH_MEM_UNCACHED
	}
	return C.INH_MEM_COARSE
}

func (h *cgoHIP) VMMGranularity(dev int, t memoryType) (int, error) {
	var g C.size_t
	err := check("hipMemGetAllocationGranularity", C.inh_vmm_granularity(C.int(dev), memTypeC(t), &g))
	return int(g), err
}

func accessList(devs []int) ([C.INH_MAX_ACCESS]C.int, C.int) {
	var out [C.INH_MAX_ACCESS]C.int
	n := min(len(devs), len(out))
	for i := range n {
		out[i] = C.int(devs[i])
	}
	return out, C.int(n)
}

func fromC(v C.gpu_vmm) vmmMapping {
	return vmmMapping{ptr: backend.DevicePtr(v.ptr), size: int(v.size), handle: uint64(v.handle)}
}

func (h *cgoHIP) VMMCreate(dev, size int, t memoryType, access []int) (vmmMapping, error) {
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var stage C.int
	r := C.inh_vmm_create(C.int(dev), memTypeC(t), C.size_t(size), &acc[0], nacc, &out, &stage)
	if err := check(stageOp(stage, "", ""), r); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

func (h *cgoHIP) VMMImportFD(dev, fd, size int, access []int) (vmmMapping, error) {
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var stage C.int
	r := C.inh_vmm_import_fd(C.int(dev), C.int(fd), C.size_t(size), &acc[0], nacc, &out, &stage)
	if err := check(stageOp(stage, "", ""), r); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

func (h *cgoHIP) VMMExportFD(dev int, m vmmMapping) (int, error) {
	var fd C.int
	err := check("hipMemExportToShareableHandle", C.inh_vmm_export_fd(C.int(dev), C.uint64_t(m.handle), &fd))
	return int(fd), err
}

func (h *cgoHIP) VMMRelease(dev int, m vmmMapping) error {
	cm := C.gpu_vmm{ptr: C.uint64_t(m.ptr), size: C.size_t(m.size), handle: C.uint64_t(m.handle)}
	var stage C.int
	r := C.inh_vmm_release(C.int(dev), &cm, &stage)
	return check(stageOp(stage, "", ""), r)
}

func (h *cgoHIP) StreamCreate(c gpu.Ctx) (hipStream, error) {
	dev := int(c)
	var s C.uintptr_t
	err := check("hipStreamCreateWithFlags", C.inh_stream_create(C.int(dev), &s))
	return hipStream(s), err
}

func (h *cgoHIP) StreamDestroy(c gpu.Ctx, s hipStream) error {
	dev := int(c)
	return check("hipStreamDestroy", C.inh_stream_destroy(C.int(dev), C.uintptr_t(s)))
}

func (h *cgoHIP) StreamQuery(c gpu.Ctx, s hipStream) (bool, error) {
	dev := int(c)
	r := C.inh_stream_query(C.int(dev), C.uintptr_t(s))
	if r == C.INH_ERROR_NOT_READY {
		return false, nil
	}
	return true, check("hipStreamQuery", r)
}

func (h *cgoHIP) StreamSynchronize(c gpu.Ctx, s hipStream) error {
	dev := int(c)
	return check("hipStreamSynchronize", C.inh_stream_sync(C.int(dev), C.uintptr_t(s)))
}

func (h *cgoHIP) StreamWaitEvent(c gpu.Ctx, s hipStream, e hipEvent) error {
	dev := int(c)
	return check("hipStreamWaitEvent", C.inh_stream_wait_event(C.int(dev), C.uintptr_t(s), C.uintptr_t(e)))
}

func (h *cgoHIP) CopyDtoDAsync(c gpu.Ctx, dst, src backend.DevicePtr, n int, s hipStream) error {
	dev := int(c)
	return check("hipMemcpyDtoDAsync", C.inh_copy_dtod_async(C.int(dev), C.uint64_t(dst), C.uint64_t(src), C.size_t(n), C.uintptr_t(s)))
}

func (h *cgoHIP) EventCreate(c gpu.Ctx, timing bool) (hipEvent, error) {
	dev := int(c)
	var flags C.uint
	if !timing {
		flags = C.INH_EVENT_DISABLE_TIMING
	}
	var e C.uintptr_t
	err := check("hipEventCreateWithFlags", C.inh_event_create(C.int(dev), flags, &e))
	return hipEvent(e), err
}

func (h *cgoHIP) EventRecord(c gpu.Ctx, e hipEvent, s hipStream) error {
	dev := int(c)
	return check("hipEventRecord", C.inh_event_record(C.int(dev), C.uintptr_t(e), C.uintptr_t(s)))
}

func (h *cgoHIP) EventQuery(c gpu.Ctx, e hipEvent) (bool, error) {
	dev := int(c)
	r := C.inh_event_query(C.int(dev), C.uintptr_t(e))
	if r == C.INH_ERROR_NOT_READY {
		return false, nil
	}
	return true, check("hipEventQuery", r)
}

func (h *cgoHIP) EventSynchronize(c gpu.Ctx, e hipEvent) error {
	dev := int(c)
	return check("hipEventSynchronize", C.inh_event_sync(C.int(dev), C.uintptr_t(e)))
}

func (h *cgoHIP) EventElapsed(c gpu.Ctx, start, end hipEvent) (float32, error) {
	dev := int(c)
	var ms C.float
	err := check("hipEventElapsedTime", C.inh_event_elapsed(C.int(dev), C.uintptr_t(start), C.uintptr_t(end), &ms))
	return float32(ms), err
}

func (h *cgoHIP) EventDestroy(c gpu.Ctx, e hipEvent) error {
	dev := int(c)
	return check("hipEventDestroy", C.inh_event_destroy(C.int(dev), C.uintptr_t(e)))
}

func (h *cgoHIP) BeginCapture(c gpu.Ctx, s hipStream) error {
	dev := int(c)
	return check("hipStreamBeginCapture", C.inh_begin_capture(C.int(dev), C.uintptr_t(s)))
}

func (h *cgoHIP) EndCapture(c gpu.Ctx, s hipStream) (hipGraph, hipGraphExec, error) {
	dev := int(c)
	var g, e C.uintptr_t
	var stage C.int
	r := C.inh_end_capture(C.int(dev), C.uintptr_t(s), &g, &e, &stage)
	return hipGraph(g), hipGraphExec(e), check(stageOp(stage, "", ""), r)
}

func (h *cgoHIP) GraphLaunch(c gpu.Ctx, e hipGraphExec, s hipStream) error {
	dev := int(c)
	return check("hipGraphLaunch", C.inh_graph_launch(C.int(dev), C.uintptr_t(e), C.uintptr_t(s)))
}

func (h *cgoHIP) GraphDestroy(c gpu.Ctx, g hipGraph, e hipGraphExec) error {
	dev := int(c)
	return check("hipGraphExecDestroy", C.inh_graph_destroy(C.int(dev), C.uintptr_t(g), C.uintptr_t(e)))
}

// cgoModules keeps each loaded module's image in C memory until it is
// unloaded: some ROCm releases read the code object lazily, after
// hipModuleLoadData has returned.
var cgoModules struct {
	mu     sync.Mutex
	images map[hipModule]unsafe.Pointer
}

func (h *cgoHIP) ModuleLoad(c gpu.Ctx, image []byte) (hipModule, error) {
	dev := int(c)
	if len(image) == 0 {
		return 0, newHIPError("hipModuleLoadData", hipErrorInvalidImage, "", "empty image")
	}
	buf := C.malloc(C.size_t(len(image)))
	if buf == nil {
		return 0, backend.Errorf(backend.CodeOutOfMemory, "cannot allocate %d bytes for a module image", len(image))
	}
	copy(unsafe.Slice((*byte)(buf), len(image)), image)
	var m C.uintptr_t
	if err := check("hipModuleLoadData", C.inh_module_load(C.int(dev), buf, &m)); err != nil {
		C.free(buf)
		return 0, err
	}
	cgoModules.mu.Lock()
	if cgoModules.images == nil {
		cgoModules.images = map[hipModule]unsafe.Pointer{}
	}
	cgoModules.images[hipModule(m)] = buf
	cgoModules.mu.Unlock()
	return hipModule(m), nil
}

func (h *cgoHIP) ModuleFunction(c gpu.Ctx, m hipModule, name string) (hipFunction, error) {
	dev := int(c)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	err := check("hipModuleGetFunction", C.inh_module_function(C.int(dev), C.uintptr_t(m), cname, &f))
	return hipFunction(f), err
}

func (h *cgoHIP) ModuleUnload(c gpu.Ctx, m hipModule) error {
	dev := int(c)
	err := check("hipModuleUnload", C.inh_module_unload(C.int(dev), C.uintptr_t(m)))
	cgoModules.mu.Lock()
	buf := cgoModules.images[m]
	delete(cgoModules.images, m)
	cgoModules.mu.Unlock()
	if buf != nil {
		C.free(buf)
	}
	return err
}

func (h *cgoHIP) Launch(c gpu.Ctx, f hipFunction, cfg backend.LaunchConfig, s hipStream, params []byte) error {
	dev := int(c)
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	r := C.inh_launch(C.int(dev), C.uintptr_t(f),
		C.uint(cfg.Grid.X), C.uint(cfg.Grid.Y), C.uint(cfg.Grid.Z),
		C.uint(cfg.Block.X), C.uint(cfg.Block.Y), C.uint(cfg.Block.Z),
		C.uint(cfg.SharedMem), C.uintptr_t(s), p, C.size_t(len(params)))
	return check("hipModuleLaunchKernel", r)
}

var _ hipRuntime = (*cgoHIP)(nil)
