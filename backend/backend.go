package backend

import (
	"context"
	"os"
	"time"

	"github.com/intranode/intranode/connectivity"
)

// DevicePtr is an address in a device's address space, as kernels see it.
// Pointers from one process mean nothing in another: peers exchange
// Handles and Import them.
type DevicePtr uint64

// Add offsets a pointer by n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

// Capability is a bit set of optional features a backend declares. The
// conformance suite skips the cases a backend does not declare, saying why.
type Capability uint32

// Capabilities.
const (
	// CapMultiProcess: shareable allocations can be imported by another
	// process (FD or fabric handles), so ranks may be separate processes.
	CapMultiProcess Capability = 1 << iota
	// CapHandleFD: shareable allocations export as POSIX file descriptors.
	CapHandleFD
	// CapHandleFabric: shareable allocations export as opaque fabric bytes
	// on devices where FabricSupported says yes.
	CapHandleFabric
	// CapGraphs: streams can be captured into replayable graphs.
	CapGraphs
	// CapHostMapped: AllocHost memory is visible to kernels and to the host
	// without copies.
	CapHostMapped
	// CapTiming: events created with timing measure elapsed device time.
	CapTiming
	// CapOverlapDevices: several ranks may share one device (the fake can;
	// real GPUs only with the allow-overlap switch).
	CapOverlapDevices
)

// Has reports whether every bit of want is set.
func (c Capability) Has(want Capability) bool { return c&want == want }

// DeviceInfo describes a device.
type DeviceInfo struct {
	Index        int    `json:"index"`
	Name         string `json:"name"`
	PCIBusID     string `json:"pci_bus_id"`
	UUID         string `json:"uuid"`
	MemoryBytes  uint64 `json:"memory_bytes"`
	Architecture string `json:"architecture"`
}

// Backend is a driver for one kind of accelerator: it enumerates the host's
// devices, reports how they are linked, and opens them.
//
// Implementations are safe for concurrent use. Methods taking a device index
// return an error matching ErrInvalidArgument for an index outside
// [0, DeviceCount()).
type Backend interface {
	// Name is the registry name ("fake", "cuda", "rocm", "plugin:…").
	Name() string
	// Probe returns nil when the backend can be used on this machine and
	// otherwise an error matching ErrUnavailable whose message says why
	// (no driver library, no device…). It does not open devices.
	Probe(ctx context.Context) error
	// Capabilities declares the optional features.
	Capabilities() Capability
	// DeviceCount is the number of devices on the host.
	DeviceCount(ctx context.Context) (int, error)
	// DeviceInfo describes device i.
	DeviceInfo(ctx context.Context, i int) (DeviceInfo, error)
	// LinkMatrix returns the links between all devices of the host.
	LinkMatrix(ctx context.Context) (connectivity.Matrix, error)
	// PeerAccess reports whether device i can read and write device j's
	// memory. The answer is cached per pair (connectivity.PeerCache); the
	// diagonal is always true. Backends that can test access for real (a
	// write and read-back through a peer mapping) do so before saying yes.
	PeerAccess(ctx context.Context, i, j int) (bool, error)
	// FabricSupported reports whether device i can export fabric handles,
	// checked by a real export/import round trip; cached.
	FabricSupported(ctx context.Context, i int) (bool, error)
	// MulticastSupported reports the device's multicast attribute. It is
	// reported only: intranode never uses multicast.
	MulticastSupported(ctx context.Context, i int) (bool, error)
	// Open returns a handle on device i for this process. Opening the same
	// index twice returns independent handles sharing the device.
	Open(ctx context.Context, i int) (Device, error)
	// Close releases what the backend holds (library handles, contexts).
	Close() error
}

// HandleKind says how a shareable allocation crosses a process boundary.
type HandleKind uint8

// Handle kinds.
const (
	// HandleFD is a POSIX file descriptor, passed with SCM_RIGHTS.
	HandleFD HandleKind = iota + 1
	// HandleFabric is opaque bytes that can travel through a store.
	HandleFabric
)

// String names the kind.
func (k HandleKind) String() string {
	switch k {
	case HandleFD:
		return "fd"
	case HandleFabric:
		return "fabric"
	}
	return "none"
}

// Handle is an exported shareable allocation.
type Handle struct {
	Kind HandleKind
	// File is set for HandleFD. Export returns a new descriptor the caller
	// owns; Import does not take ownership of it.
	File *os.File
	// Opaque is set for HandleFabric.
	Opaque []byte
	// Size is the allocation size in bytes.
	Size int
}

// Allocation is device memory owned by (or mapped into) this process.
type Allocation interface {
	// Ptr is the base address.
	Ptr() DevicePtr
	// Size is the usable size in bytes.
	Size() int
	// Export returns a handle another process can Import. Plain and imported
	// allocations return an error matching ErrNotSupported.
	Export(kind HandleKind) (Handle, error)
	// Close unmaps (imported) or frees (owned) the memory. Closing twice is
	// a no-op.
	Close() error
}

// HostAllocation is pinned host memory that kernels can also address: the
// host reads and writes Bytes, kernels use Ptr. Collectives put status words
// here so the host can read a kernel's error without a copy.
type HostAllocation interface {
	Allocation
	// Bytes is the host view; it is valid until Close.
	Bytes() []byte
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional shape.
func D1(x uint32) Dim3 { return Dim3{X: x, Y: 1, Z: 1} }

// LaunchConfig describes one kernel launch.
type LaunchConfig struct {
	Grid      Dim3
	Block     Dim3
	SharedMem uint32
	// Early lets the kernel start before the work ahead of it on the
	// stream has finished: the kernel itself waits for that work before it
	// touches memory the work may write (programmatic dependent launch on
	// CUDA devices of compute capability 9.0 and newer, where the driver
	// has cuLaunchKernelEx). Backends and devices without it launch
	// normally. Only kernels written for it may set it: the intranode
	// all-reduce kernels are (kernels/abi.go).
	Early bool
}

// ModuleSource names a kernel module. A Name alone asks the backend for one
// of its built-in modules (every backend provides kernels.ModuleName); Image
// carries a backend-specific binary (cubin, PTX, HSA code object) to load.
type ModuleSource struct {
	Name  string
	Image []byte
}

// Module is loaded device code.
type Module interface {
	// Function looks up a kernel by name; ErrNotFound if absent.
	Function(name string) (Function, error)
	// Close unloads the module.
	Close() error
}

// Function is a kernel ready to launch.
type Function interface {
	Name() string
}

// RangeChecker is implemented by devices that can tell whether device
// memory [p, p+n) lies inside one live allocation (the fake's allocation
// table; cuMemGetAddressRange or hipMemGetAddressRange on a GPU). The
// collectives check their arguments against it before launching, so a
// count beyond the caller's allocation is a clear error on the calling
// rank, never an access past the allocation.
type RangeChecker interface {
	// CheckRange returns an error matching ErrInvalidArgument, naming the
	// allocation, when [p, p+n) is not inside one live allocation.
	CheckRange(p DevicePtr, n int) error
}

// NativeStreams is implemented by devices whose streams are the vendor
// runtime's (a CUstream on CUDA, a hipStream_t on ROCm), so that code
// outside Go (the C ABI, the NCCL-API library) can pass its own streams in
// and hand the device's streams to other libraries.
type NativeStreams interface {
	// ImportStream wraps a runtime stream the caller created (0: the
	// context's default stream). The Stream does not own it: Close
	// releases the wrapper and neither synchronizes nor destroys the
	// runtime stream.
	ImportStream(h uintptr) (Stream, error)
	// NativeStream returns the runtime handle of a stream of this device,
	// and false for a stream that is not one.
	NativeStream(s Stream) (uintptr, bool)
}

// Device is an opened device. Its methods are safe for concurrent use;
// work queued on one Stream runs in order, work on different streams may
// overlap.
type Device interface {
	// Index is the device's index on the host.
	Index() int
	// Info describes the device.
	Info() DeviceInfo
	// Granularity is the size every shareable allocation is rounded up to.
	Granularity() int
	// Alloc returns plain device memory (not shareable).
	Alloc(ctx context.Context, size int) (Allocation, error)
	// AllocShareable returns memory that can be exported with the given
	// kind. Size is rounded up to Granularity. New memory is zeroed.
	AllocShareable(ctx context.Context, size int, kind HandleKind) (Allocation, error)
	// Import maps memory exported by another process (or this one) and
	// grants this device access to it.
	Import(ctx context.Context, h Handle) (Allocation, error)
	// AllocHost returns pinned host memory visible to this device's kernels
	// (CapHostMapped). New memory is zeroed.
	AllocHost(ctx context.Context, size int) (HostAllocation, error)
	// CopyToDevice copies host bytes to device memory, synchronously.
	CopyToDevice(ctx context.Context, dst DevicePtr, src []byte) error
	// CopyFromDevice copies device memory to host bytes, synchronously.
	CopyFromDevice(ctx context.Context, dst []byte, src DevicePtr) error
	// Memset sets n bytes at dst to v, synchronously.
	Memset(ctx context.Context, dst DevicePtr, v byte, n int) error
	// NewStream creates an asynchronous, in-order work queue.
	NewStream(ctx context.Context) (Stream, error)
	// NewEvent creates an event; timing events can measure elapsed time
	// (CapTiming).
	NewEvent(ctx context.Context, timing bool) (Event, error)
	// LoadModule loads device code.
	LoadModule(ctx context.Context, src ModuleSource) (Module, error)
	// Close releases the device handle. Allocations, streams and modules
	// must be closed first; Close reports the ones that were not.
	Close() error
}

// Stream is an in-order asynchronous queue of device work. Enqueueing never
// blocks on device work; errors from the work itself surface at the next
// Synchronize (or event Synchronize) on that stream.
type Stream interface {
	// Launch enqueues a kernel. Arguments are marshalled with their real
	// sizes and alignment (see MarshalArgs). Launch does not keep args
	// after it returns (a backend that runs the kernel later copies them),
	// so callers may reuse the slice.
	Launch(fn Function, cfg LaunchConfig, args ...Arg) error
	// CopyAsync enqueues a device-to-device copy of n bytes.
	CopyAsync(dst, src DevicePtr, n int) error
	// Record enqueues ev: it completes when all work before it has.
	Record(ev Event) error
	// WaitEvent makes work enqueued after it wait for ev.
	WaitEvent(ev Event) error
	// Synchronize waits until all enqueued work is done, or ctx ends
	// (ErrTimeout wrapping ctx.Err()).
	Synchronize(ctx context.Context) error
	// BeginCapture starts recording work instead of running it (CapGraphs).
	BeginCapture() error
	// EndCapture stops recording and returns the graph.
	EndCapture() (Graph, error)
	// Close waits for queued work to drain and releases the stream.
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Synchronize waits until the event has completed or ctx ends.
	Synchronize(ctx context.Context) error
	// Done reports whether the event has completed.
	Done() (bool, error)
	// Elapsed is the device time from start to this event; both must be
	// timing events and complete.
	Elapsed(start Event) (time.Duration, error)
	// Close releases the event.
	Close() error
}

// Graph is captured work that can be replayed.
type Graph interface {
	// Launch enqueues one replay on s.
	Launch(s Stream) error
	// Close releases the graph.
	Close() error
}
