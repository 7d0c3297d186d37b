//go:build rocm

package rocm

import (
	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
)

// The HIP runtime as the backend uses it, split by concern into a few small
// interfaces. The backend and the shared GPU core are written against them only: hip_cgo.go binds
// them to libamdhip64.so, one C call per operation with the device made
// current inside it, and the tests bind them to a fake runtime in Go. Every
// method that works on a device takes its ordinal and makes it current
// itself, so callers never depend on a goroutine's OS thread. Failures are
// *HIPError values.

// Runtime-owned handles. Go stores them and passes them back, nothing more.
type (
	hipStream    = gpu.Handle
	hipEvent     = gpu.Handle
	hipModule    = gpu.Handle
	hipFunction  = gpu.Handle
	hipGraph     = gpu.Handle
	hipGraphExec = gpu.Handle
)

// ipcHandle is a hipIpcMemHandle_t: 64 opaque bytes naming an allocation
// another process can open.
type ipcHandle [ipcHandleSize]byte

// ipcHandleSize is HIP_IPC_HANDLE_SIZE.
const ipcHandleSize = 64

// deviceAttribute is a hipDeviceAttribute_t. Attributes are read one at a
// time with hipDeviceGetAttribute rather than from hipDeviceProp_t, whose
// layout changed in ROCm 6; the values below are the same in the ROCm 5 and
// ROCm 6 headers (those marked 6 are new there: ROCm 5 answers
// hipErrorInvalidValue).
type deviceAttribute int

// Device attributes the backend reads.
const (
	attrCanMapHostMemory     deviceAttribute = 3
	attrComputeMajor         deviceAttribute = 23
	attrComputeMinor         deviceAttribute = 61
	attrMultiprocessorCount  deviceAttribute = 63
	attrWarpSize             deviceAttribute = 87
	attrVirtualMemory        deviceAttribute = 89    // ROCm 6
	attrFineGrainSupport     deviceAttribute = 10016 // AMD specific
	attrWallClockRateKHz     deviceAttribute = 10017 // AMD specific, ROCm 6
	attrClockInstructionRate deviceAttribute = 10000 // AMD specific
)

// memoryType says how shareable memory is cached, which decides whether a
// peer's writes to a signal pad are seen by a kernel that is polling it.
type memoryType int

// Memory types of shareable allocations, most coherent first.
const (
	// memUncached is device memory that bypasses the caches for peers and
	// the owner alike (hipDeviceMallocUncached, hipMemAllocationTypeUncached).
	memUncached memoryType = iota + 1
	// memFineGrained is fine-grained device memory (hipDeviceMallocFinegrained),
	// what ROCm 5 offers when it does not know the uncached flag.
	memFineGrained
	// memCoarse is ordinary coarse-grained device memory
	// (hipMemAllocationTypePinned): a peer's writes land in memory, but a
	// kernel of the owner running at the time may keep reading its stale L2
	// copy, so signal pads in it can hang. Used only when forced.
	memCoarse
)

// String names the type as the HIP flag that requests it.
func (t memoryType) String() string {
	switch t {
	case memUncached:
		return "uncached"
	case memFineGrained:
		return "fine-grained"
	case memCoarse:
		return "coarse-grained"
	}
	return "unknown"
}

// vmmMapping is memory mapped through the virtual memory management API:
// the address range, its size and the allocation handle behind it.
type vmmMapping struct {
	ptr    backend.DevicePtr
	size   int
	handle uint64
}

// hipDevices enumerates the devices and answers questions about them.
type hipDevices interface {
	// Library is the path or name the runtime was loaded from.
	Library() string
	// Init runs hipInit. On a machine without AMD GPUs it fails with
	// hipErrorNoDevice or hipErrorInvalidDevice.
	Init() error
	// Version returns hipRuntimeGetVersion and hipDriverGetVersion
	// (major*10000000 + minor*100000 + patch).
	Version() (runtime, driver int, err error)
	DeviceCount() (int, error)
	DeviceName(dev int) (string, error)
	DevicePCIBusID(dev int) (string, error)
	DeviceTotalMem(dev int) (uint64, error)
	// DeviceUUID returns hipDeviceGetUuid's 16 bytes; ok is false when the
	// runtime lacks the entry point.
	DeviceUUID(dev int) (uuid [16]byte, ok bool, err error)
	DeviceAttribute(dev int, attr deviceAttribute) (int, error)
	CanAccessPeer(dev, peer int) (bool, error)
	// EnablePeerAccess lets dev's kernels and copies reach peer's memory;
	// already enabled is success.
	EnablePeerAccess(dev, peer int) error
}

// hipShare makes and shares memory another process can import. New memory
// is zeroed.
type hipShare interface {
	// MallocShareable allocates memory of the given type with
	// hipExtMallocWithFlags (memUncached or memFineGrained).
	MallocShareable(dev, n int, t memoryType) (backend.DevicePtr, error)
	// IPCGetHandle exports an allocation made by MallocShareable.
	IPCGetHandle(dev int, p backend.DevicePtr) (ipcHandle, error)
	// IPCOpenHandle maps an allocation exported by another process; HIP
	// refuses handles of the calling process (hipErrorInvalidContext).
	IPCOpenHandle(dev int, h ipcHandle) (backend.DevicePtr, error)
	IPCCloseHandle(dev int, p backend.DevicePtr) error

	// HasVMM reports whether the runtime has the virtual memory management
	// entry points with the ROCm 6 structure layouts the backend declares.
	HasVMM() bool
	// VMMGranularity is the minimum granularity of t (memUncached or
	// memCoarse) allocations on dev, exportable as file descriptors.
	VMMGranularity(dev int, t memoryType) (int, error)
	// VMMCreate allocates size bytes of t memory on dev (rounded up to the
	// granularity), maps them, grants read/write access to the devices in
	// access and zeroes them.
	VMMCreate(dev, size int, t memoryType, access []int) (vmmMapping, error)
	// VMMImportFD maps memory exported as a POSIX file descriptor (which
	// stays the caller's) and grants access to the devices in access.
	VMMImportFD(dev, fd, size int, access []int) (vmmMapping, error)
	// VMMExportFD returns a new descriptor the caller owns.
	VMMExportFD(dev int, m vmmMapping) (int, error)
	// VMMRelease waits for dev's work, unmaps, frees the address range and
	// releases the handle.
	VMMRelease(dev int, m vmmMapping) error
}

// hipRuntime is the whole HIP runtime the backend needs.
type hipRuntime interface {
	// Runtime is the part the shared GPU core drives; its Ctx is the
	// device ordinal.
	gpu.Runtime
	hipDevices
	hipShare
}
