package gpu

import (
	"context"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// Ctx names the device a runtime call works on: CUDA's primary context,
// HIP's device ordinal. The runtime makes it current on the calling thread
// inside each call, so callers never depend on a goroutine's OS thread.
type Ctx uintptr

// Handle is a runtime-owned object: a stream, event, module, function,
// graph or executable graph. Go stores it and passes it back, nothing more.
type Handle uintptr

// Runtime is a vendor's driver API as the core uses it: one call per
// operation. Synchronous copies and memsets return once the device has
// finished them; new memory is zeroed. Query methods report not-ready as
// done == false, not as an error. Failures carry a Code method (the
// vendor's error type) so that Wrap can classify them.
type Runtime interface {
	Malloc(c Ctx, n int) (backend.DevicePtr, error)
	Free(c Ctx, p backend.DevicePtr) error
	// HostMalloc returns pinned host memory mapped into the device's
	// address space, portable across devices.
	HostMalloc(c Ctx, n int) (host unsafe.Pointer, dptr backend.DevicePtr, err error)
	HostFree(c Ctx, host unsafe.Pointer) error
	CopyHtoD(c Ctx, dst backend.DevicePtr, src []byte) error
	CopyDtoH(c Ctx, dst []byte, src backend.DevicePtr) error
	CopyDtoD(c Ctx, dst, src backend.DevicePtr, n int) error
	Memset(c Ctx, dst backend.DevicePtr, v byte, n int) error
	// AddressRange returns the base and size of the allocation the driver
	// knows that holds p (cuMemGetAddressRange, hipMemGetAddressRange);
	// an error when it knows none.
	AddressRange(c Ctx, p backend.DevicePtr) (base backend.DevicePtr, size int, err error)

	// StreamCreate creates a non-blocking stream (it never waits for the
	// legacy default stream).
	StreamCreate(c Ctx) (Handle, error)
	StreamDestroy(c Ctx, s Handle) error
	StreamQuery(c Ctx, s Handle) (done bool, err error)
	StreamSynchronize(c Ctx, s Handle) error
	StreamWaitEvent(c Ctx, s, e Handle) error
	CopyDtoDAsync(c Ctx, dst, src backend.DevicePtr, n int, s Handle) error
	// EventCreate creates an event; without timing it is cheaper to record
	// and wait on.
	EventCreate(c Ctx, timing bool) (Handle, error)
	EventRecord(c Ctx, e, s Handle) error
	EventQuery(c Ctx, e Handle) (done bool, err error)
	EventSynchronize(c Ctx, e Handle) error
	// EventElapsed is the time from start to end in milliseconds.
	EventElapsed(c Ctx, start, end Handle) (float32, error)
	EventDestroy(c Ctx, e Handle) error
	// BeginCapture starts a relaxed-mode capture: the other modes tie the
	// capture to the OS thread that began it, and a goroutine may move
	// between threads before EndCapture.
	BeginCapture(c Ctx, s Handle) error
	// EndCapture ends the capture and instantiates the graph.
	EndCapture(c Ctx, s Handle) (graph, exec Handle, err error)
	GraphLaunch(c Ctx, exec, s Handle) error
	GraphDestroy(c Ctx, graph, exec Handle) error

	// ModuleLoad loads a code image (cubin, fatbin, PTX; a code object or
	// offload bundle).
	ModuleLoad(c Ctx, image []byte) (Handle, error)
	ModuleFunction(c Ctx, m Handle, name string) (Handle, error)
	ModuleUnload(c Ctx, m Handle) error
	// Launch enqueues f on s with the packed parameter buffer params,
	// which the runtime copies before returning. cfg.Early is set only on
	// devices whose DeviceSetup said Early.
	Launch(c Ctx, f Handle, cfg backend.LaunchConfig, s Handle, params []byte) error
}

// DeviceSetup is what a vendor prepares when a device is opened.
type DeviceSetup struct {
	// Ctx is the context every call on the device uses.
	Ctx Ctx
	// Granularity is the size shareable allocations are rounded up to; 0
	// when the device cannot make them.
	Granularity int
	// Early says the device takes early launches
	// (backend.LaunchConfig.Early); without it the flag is dropped.
	Early bool
	// Ext is the vendor's own per-device state, kept in Device.Ext.
	Ext any
}

// Shared is a vendor's shareable allocation, made by AllocShareable or
// Import. The core tracks it and makes Close idempotent.
type Shared interface {
	Ptr() backend.DevicePtr
	Size() int
	// Export returns a handle for another process; it fails for imported
	// memory and for kinds the allocation was not made for.
	Export(kind backend.HandleKind) (backend.Handle, error)
	// Release unmaps or frees the memory, once.
	Release() error
}

// Vendor is what one backend fills: its runtime, and what differs between
// vendors beyond it.
type Vendor interface {
	Runtime
	// Name is the backend's registry name; it starts every message.
	Name() string
	// PeerQuery names the driver's can-access-peer call, for the reason a
	// refused pair gives ("cuDeviceCanAccessPeer").
	PeerQuery() string
	// CanAccessPeer asks the driver whether device i can reach device j's
	// memory (host indices).
	CanAccessPeer(i, j int) (bool, error)
	// EnablePeer lets device i reach device j's memory; already enabled
	// is success.
	EnablePeer(i, j int) error
	// Context returns a context on device i for the backend's own checks,
	// held until the backend closes.
	Context(i int) (Ctx, error)
	// OpenDevice readies device i for a new Device handle; CloseDevice
	// undoes it.
	OpenDevice(i int) (DeviceSetup, error)
	CloseDevice(d *Device) error
	// AllocShareable makes size bytes (already rounded up to the
	// granularity) of zeroed memory exportable as kind (Core.AccessDevices
	// lists the devices of this process that may use it unimported).
	AllocShareable(ctx context.Context, d *Device, size int, kind backend.HandleKind) (Shared, error)
	// Import maps memory another process (or this one) exported; the
	// handle's size is already checked against the granularity.
	Import(ctx context.Context, d *Device, h backend.Handle) (Shared, error)
	// CheckFabric says whether device i can share memory through opaque
	// handles (backend.HandleFabric) and, if not, why.
	CheckFabric(i int) (ok bool, reason string, err error)
	// BuiltinImage returns the image of the built-in kernels.ModuleName.
	BuiltinImage() ([]byte, error)
	// ExplainLoad may turn a failed load of the built-in image into an
	// error that says what to do; nil keeps the runtime's error.
	ExplainLoad(d *Device, image []byte, err error) error
}
