package gpu

import (
	"sync/atomic"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// plainMemory is device memory from the runtime's Malloc.
type plainMemory struct {
	d      *Device
	ptr    backend.DevicePtr
	size   int
	closed atomic.Bool
}

// Ptr is the base address.
func (a *plainMemory) Ptr() backend.DevicePtr { return a.ptr }

// Size is the size in bytes.
func (a *plainMemory) Size() int { return a.size }

// Export fails: plain memory is not shareable (use AllocShareable).
func (a *plainMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "plain allocations cannot be exported (use AllocShareable)")
}

// Close frees the memory (the runtime waits for work using it).
func (a *plainMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return a.d.Wrap(a.d.v.Free(a.d.ctx, a.ptr), "freeing %#x", uint64(a.ptr))
}

func (a *plainMemory) resourceKind() string { return "allocation" }

// hostMemory is pinned host memory mapped into the device address space.
type hostMemory struct {
	plainMemory
	host unsafe.Pointer
}

// Bytes is the host view, valid until Close.
func (a *hostMemory) Bytes() []byte { return unsafe.Slice((*byte)(a.host), a.size) }

// Export fails: host memory is not shareable.
func (a *hostMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "host allocations cannot be exported")
}

// Close frees the memory.
func (a *hostMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return a.d.Wrap(a.d.v.HostFree(a.d.ctx, a.host), "freeing mapped host memory")
}

// sharedMemory is a vendor's shareable allocation, tracked by its device.
type sharedMemory struct {
	d      *Device
	m      Shared
	closed atomic.Bool
}

// Ptr is the base address of this process's mapping.
func (a *sharedMemory) Ptr() backend.DevicePtr { return a.m.Ptr() }

// Size is the mapped size in bytes (a multiple of the granularity).
func (a *sharedMemory) Size() int { return a.m.Size() }

// Export returns a handle another process can Import.
func (a *sharedMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.closed.Load() {
		return backend.Handle{}, a.d.Errorf(backend.CodeClosed, "export of a closed allocation")
	}
	return a.m.Export(kind)
}

// Close releases this process's view of the memory; the memory itself goes
// when every process has released it.
func (a *sharedMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return a.m.Release()
}

func (a *sharedMemory) resourceKind() string { return "allocation" }

var (
	_ backend.Allocation     = (*plainMemory)(nil)
	_ backend.HostAllocation = (*hostMemory)(nil)
	_ backend.Allocation     = (*sharedMemory)(nil)
)
