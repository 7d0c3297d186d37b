//go:build rocm

package rocm

/*
#cgo LDFLAGS: -ldl
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
			rt := &cgoHIP{lib: lib, Runtime: gpu.NewRuntime(unsafe.Pointer(C.inh_runtime()), runtimeError, true)}
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

// cgoHIP is the hipRuntime of libamdhip64.so: the shared GPU core's binding
// of the runtime shims (keeping module images until their unload: some ROCm
// releases read the code object after hipModuleLoadData has returned), and
// the HIP calls of hip.go.
type cgoHIP struct {
	gpu.Runtime
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

// checkAt is check for a shim that stored the slot of the entry point it
// called last in at (shim_impl.h).
func checkAt(r C.inh_result, at C.uintptr_t) error {
	if r == C.INH_SUCCESS {
		return nil
	}
	return resultError(C.GoString(C.inh_entry_name(at)), int(r))
}

// runtimeError is resultError as an error, for the shared runtime binding.
func runtimeError(op string, r int) error { return resultError(op, r) }

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

func (h *cgoHIP) MallocShareable(dev, n int, t memoryType) (backend.DevicePtr, error) {
	flags := C.uint(C.INH_DEVICE_MALLOC_UNCACHED)
	if t == memFineGrained {
		flags = C.INH_DEVICE_MALLOC_FINEGRAINED
	}
	var p C.uint64_t
	var at C.uintptr_t
	r := C.inh_malloc(C.int(dev), C.size_t(n), flags, 1, &p, &at)
	return backend.DevicePtr(p), checkAt(r, at)
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
	var at C.uintptr_t
	r := C.inh_vmm_create(C.int(dev), memTypeC(t), C.size_t(size), &acc[0], nacc, &out, &at)
	if err := checkAt(r, at); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

func (h *cgoHIP) VMMImportFD(dev, fd, size int, access []int) (vmmMapping, error) {
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var at C.uintptr_t
	r := C.inh_vmm_import_fd(C.int(dev), C.int(fd), C.size_t(size), &acc[0], nacc, &out, &at)
	if err := checkAt(r, at); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

func (h *cgoHIP) VMMExportFD(dev int, m vmmMapping) (int, error) {
	var fd C.int
	var at C.uintptr_t
	err := checkAt(C.inh_vmm_export_fd(C.uintptr_t(dev), C.uint64_t(m.handle), &fd, &at), at)
	return int(fd), err
}

func (h *cgoHIP) VMMRelease(dev int, m vmmMapping) error {
	cm := C.gpu_vmm{ptr: C.uint64_t(m.ptr), size: C.size_t(m.size), handle: C.uint64_t(m.handle)}
	var at C.uintptr_t
	r := C.inh_vmm_release(C.uintptr_t(dev), &cm, &at)
	return checkAt(r, at)
}

var _ hipRuntime = (*cgoHIP)(nil)
