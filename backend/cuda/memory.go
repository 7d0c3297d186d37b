//go:build cuda

package cuda

import (
	"context"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// deviceMemory is plain device memory from cuMemAlloc.
type deviceMemory struct {
	d      *device
	ptr    backend.DevicePtr
	size   int
	closed atomic.Bool
}

// Ptr is the base address.
func (a *deviceMemory) Ptr() backend.DevicePtr { return a.ptr }

// Size is the size in bytes.
func (a *deviceMemory) Size() int { return a.size }

// Export fails: plain memory is not shareable (use AllocShareable).
func (a *deviceMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "cuda: device %d: plain allocations cannot be exported (use AllocShareable)", a.d.index)
}

// Close frees the memory (cuMemFree waits for work using it).
func (a *deviceMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return wrap(memFree(a.d.ctx, a.ptr), "cuda: device %d: freeing %#x", a.d.index, uint64(a.ptr))
}

func (a *deviceMemory) resourceKind() string { return "allocation" }

// hostMemory is pinned host memory mapped into the device address space.
type hostMemory struct {
	d      *device
	host   unsafe.Pointer
	ptr    backend.DevicePtr
	size   int
	closed atomic.Bool
}

// Ptr is the address kernels use.
func (a *hostMemory) Ptr() backend.DevicePtr { return a.ptr }

// Size is the size in bytes.
func (a *hostMemory) Size() int { return a.size }

// Bytes is the host view, valid until Close.
func (a *hostMemory) Bytes() []byte { return unsafe.Slice((*byte)(a.host), a.size) }

// Export fails: host memory is not shareable.
func (a *hostMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "cuda: device %d: host allocations cannot be exported", a.d.index)
}

// Close frees the memory.
func (a *hostMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return wrap(hostFree(a.d.ctx, a.host), "cuda: device %d: freeing mapped host memory", a.d.index)
}

func (a *hostMemory) resourceKind() string { return "allocation" }

// sharedMemory is memory created or imported through the virtual memory
// management API.
type sharedMemory struct {
	d        *device
	m        vmmMapping
	kind     backend.HandleKind
	imported bool
	closed   atomic.Bool
}

// Ptr is the base address of this process's mapping.
func (a *sharedMemory) Ptr() backend.DevicePtr { return a.m.ptr }

// Size is the mapped size in bytes (a multiple of the granularity).
func (a *sharedMemory) Size() int { return a.m.size }

// Export returns a handle for another process (or this one) to Import: a
// new file descriptor the caller owns for backend.HandleFD, the 64 opaque
// bytes of a fabric handle for backend.HandleFabric. Only the kind the
// allocation was made for can be exported; imported memory cannot be
// re-exported.
func (a *sharedMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.closed.Load() {
		return backend.Handle{}, backend.Errorf(backend.CodeClosed, "cuda: device %d: export of a closed allocation", a.d.index)
	}
	if a.imported {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "cuda: device %d: imported allocations cannot be exported", a.d.index)
	}
	if kind != a.kind {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "cuda: device %d: a %s allocation cannot be exported as %s", a.d.index, a.kind, kind)
	}
	switch kind {
	case backend.HandleFD:
		fd, err := vmmExportFD(a.d.ctx, a.m)
		if err != nil {
			return backend.Handle{}, wrap(err, "cuda: device %d: exporting a file descriptor", a.d.index)
		}
		// Like every descriptor Go opens: not inherited across exec
		// unless passed on purpose (exec.Cmd.ExtraFiles).
		syscall.CloseOnExec(fd)
		return backend.Handle{Kind: kind, File: os.NewFile(uintptr(fd), "cuda-shareable"), Size: a.m.size}, nil
	default:
		opaque, err := vmmExportFabric(a.d.ctx, a.m)
		if err != nil {
			return backend.Handle{}, wrap(err, "cuda: device %d: exporting a fabric handle", a.d.index)
		}
		return backend.Handle{Kind: kind, Opaque: opaque, Size: a.m.size}, nil
	}
}

// Close waits for the device's queued work, then unmaps the memory, frees
// the address range and releases the allocation handle; the memory itself
// goes when every process has released it.
func (a *sharedMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return wrap(vmmRelease(a.d.ctx, a.m), "cuda: device %d: releasing shareable memory at %#x", a.d.index, uint64(a.m.ptr))
}

func (a *sharedMemory) resourceKind() string { return "allocation" }

// AllocShareable creates memory with cuMemCreate that can be exported as a
// POSIX file descriptor (HandleFD) or, on devices where FabricSupported says
// yes, a fabric handle (HandleFabric). The size is rounded up to the
// granularity; the memory is mapped read/write for this device and for the
// other devices this process has open that can access it as peers, and
// zeroed.
func (d *device) AllocShareable(ctx context.Context, size int, kind backend.HandleKind) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if d.vmmErr != nil {
		return nil, d.vmmErr
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: shareable allocation of %d bytes", d.index, size)
	}
	var types int
	switch kind {
	case backend.HandleFD:
		types = handleTypePOSIXFD
	case backend.HandleFabric:
		ok, err := d.b.FabricSupported(ctx, d.index)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, backend.Errorf(backend.CodeNotSupported, "cuda: device %d does not support fabric handles (use file descriptors)", d.index)
		}
		types = handleTypeFabric
	default:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: unknown handle kind %d", d.index, kind)
	}
	access, err := d.b.accessDevices(d.index)
	if err != nil {
		return nil, err
	}
	size = alignUp(size, d.granularity)
	m, err := vmmCreate(d.ctx, d.ordinal, types, size, access)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: creating %d bytes of %s-shareable memory", d.index, size, kind)
	}
	a := &sharedMemory{d: d, m: m, kind: kind}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// Import maps memory exported by AllocShareable — in another process or
// this one — and grants this device read/write access to it. The handle's
// file descriptor stays owned by the caller.
func (d *device) Import(ctx context.Context, h backend.Handle) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if d.vmmErr != nil {
		return nil, d.vmmErr
	}
	if h.Size <= 0 || h.Size%d.granularity != 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: import of %d bytes (must be a positive multiple of %d)", d.index, h.Size, d.granularity)
	}
	access := []int{d.ordinal}
	var (
		m   vmmMapping
		err error
	)
	switch h.Kind {
	case backend.HandleFD:
		if h.File == nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: fd handle without a file", d.index)
		}
		m, err = vmmImportFD(d.ctx, int(h.File.Fd()), h.Size, access)
		runtime.KeepAlive(h.File)
	case backend.HandleFabric:
		if len(h.Opaque) != fabricHandleSize {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: fabric handle of %d bytes, want %d", d.index, len(h.Opaque), fabricHandleSize)
		}
		m, err = vmmImportFabric(d.ctx, h.Opaque, h.Size, access)
	default:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: import of a %s handle", d.index, h.Kind)
	}
	if err != nil {
		return nil, wrap(err, "cuda: device %d: importing %d bytes from a %s handle", d.index, h.Size, h.Kind)
	}
	a := &sharedMemory{d: d, m: m, kind: h.Kind, imported: true}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// alignUp rounds n up to a multiple of a (a > 0).
func alignUp(n, a int) int {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}

var (
	_ backend.Allocation     = (*deviceMemory)(nil)
	_ backend.HostAllocation = (*hostMemory)(nil)
	_ backend.Allocation     = (*sharedMemory)(nil)
)
