//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// libcudaName is the driver library the backend opens at run time.
const libcudaName = "libcuda.so.1"

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

// checkAt is check for a shim that stored the slot of the entry point it
// called last in at (shim_impl.h).
func checkAt(r C.CUresult, at C.uintptr_t) error {
	if r == resultSuccess {
		return nil
	}
	return newDriverError(C.GoString(C.inu_entry_name(at)), int(r))
}

// driverRuntime is the driver as the shared GPU core uses it (gpu.Runtime):
// contexts are primary contexts (gpu.Ctx), streams, events, modules,
// functions and graphs are driver pointers (gpu.Handle).
func driverRuntime() gpu.Runtime {
	return gpu.NewRuntime(unsafe.Pointer(C.inu_runtime()), func(op string, r int) error { return newDriverError(op, r) }, false)
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
	var at C.uintptr_t
	r := C.inu_vmm_create(C.uintptr_t(ctx), C.int(dev), C.int(handleTypes), C.size_t(size), &acc[0], nacc, &out, &at)
	if err := checkAt(r, at); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

// vmmImportFD maps memory exported as a POSIX file descriptor. The
// descriptor stays owned by the caller.
func vmmImportFD(ctx ctxHandle, fd int, size int, access []int) (vmmMapping, error) {
	acc, nacc := accessList(access)
	var out C.gpu_vmm
	var at C.uintptr_t
	r := C.inu_vmm_import(C.uintptr_t(ctx), handleTypePOSIXFD, C.int(fd), nil, C.size_t(size), &acc[0], nacc, &out, &at)
	if err := checkAt(r, at); err != nil {
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
	var at C.uintptr_t
	r := C.inu_vmm_import(C.uintptr_t(ctx), handleTypeFabric, -1, unsafe.Pointer(&fh[0]), C.size_t(size), &acc[0], nacc, &out, &at)
	if err := checkAt(r, at); err != nil {
		return vmmMapping{}, err
	}
	return fromC(out), nil
}

// vmmRelease waits for the context's work, unmaps, frees the address range
// and releases the handle.
func vmmRelease(ctx ctxHandle, m vmmMapping) error {
	cm := m.c()
	var at C.uintptr_t
	r := C.inu_vmm_release(C.uintptr_t(ctx), &cm, &at)
	return checkAt(r, at)
}

func vmmExportFD(ctx ctxHandle, m vmmMapping) (int, error) {
	var fd C.int
	var at C.uintptr_t
	err := checkAt(C.inu_vmm_export_fd(C.uintptr_t(ctx), C.uint64_t(m.handle), &fd, &at), at)
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
	var at C.uintptr_t
	r := C.inu_fabric_roundtrip(C.uintptr_t(ctx), C.int(dev), &at)
	return checkAt(r, at)
}

// hasLaunchEx tells whether the driver has cuLaunchKernelEx.
func hasLaunchEx() bool { return C.inu_has_launch_ex() != 0 }
