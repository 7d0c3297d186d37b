//go:build rocm

package rocm

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// deviceMemory is plain device memory from hipMalloc.
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
	return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: plain allocations cannot be exported (use AllocShareable)", a.d.index)
}

// Close frees the memory.
func (a *deviceMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return wrap(a.d.hip.Free(a.d.index, a.ptr), "rocm: device %d: freeing %#x", a.d.index, uint64(a.ptr))
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
	return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: host allocations cannot be exported", a.d.index)
}

// Close frees the memory.
func (a *hostMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return wrap(a.d.hip.HostFree(a.d.index, a.host), "rocm: device %d: freeing mapped host memory", a.d.index)
}

func (a *hostMemory) resourceKind() string { return "allocation" }

// vmmMemory is memory created or imported through the virtual memory
// management API, shared as file descriptors.
type vmmMemory struct {
	d        *device
	m        vmmMapping
	imported bool
	closed   atomic.Bool
}

// Ptr is the base address of this process's mapping.
func (a *vmmMemory) Ptr() backend.DevicePtr { return a.m.ptr }

// Size is the mapped size in bytes (a multiple of the granularity).
func (a *vmmMemory) Size() int { return a.m.size }

// Export returns a new file descriptor the caller owns; only
// backend.HandleFD, and not for imported memory.
func (a *vmmMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.closed.Load() {
		return backend.Handle{}, backend.Errorf(backend.CodeClosed, "rocm: device %d: export of a closed allocation", a.d.index)
	}
	if a.imported {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: imported allocations cannot be exported", a.d.index)
	}
	if kind != backend.HandleFD {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: a file-descriptor allocation cannot be exported as %s", a.d.index, kind)
	}
	fd, err := a.d.hip.VMMExportFD(a.d.index, a.m)
	if err != nil {
		return backend.Handle{}, wrap(err, "rocm: device %d: exporting a file descriptor", a.d.index)
	}
	// Like every descriptor Go opens: not inherited across exec unless
	// passed on purpose.
	syscall.CloseOnExec(fd)
	return backend.Handle{Kind: backend.HandleFD, File: os.NewFile(uintptr(fd), "rocm-shareable"), Size: a.m.size}, nil
}

// Close waits for the device's work, then unmaps the memory, frees the
// address range and releases the allocation handle; the memory itself goes
// when every process has released it.
func (a *vmmMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	return wrap(a.d.hip.VMMRelease(a.d.index, a.m), "rocm: device %d: releasing shareable memory at %#x", a.d.index, uint64(a.m.ptr))
}

func (a *vmmMemory) resourceKind() string { return "allocation" }

// ipcBlock is memory from hipExtMallocWithFlags exported as an IPC handle.
// Ranks in the process that made it use its address directly (HIP refuses
// to open a handle in the process that created it), so the block is
// reference counted: the owner's allocation and every in-process import
// hold it, and it is freed when the last lets go.
type ipcBlock struct {
	d      *device
	ptr    backend.DevicePtr
	size   int
	handle ipcHandle
	refs   atomic.Int32
}

// release drops one reference and frees the memory with the last.
func (blk *ipcBlock) release() error {
	if blk.refs.Add(-1) > 0 {
		return nil
	}
	return wrap(blk.d.hip.Free(blk.d.index, blk.ptr), "rocm: device %d: freeing shareable memory at %#x", blk.d.index, uint64(blk.ptr))
}

// ipcExports maps the IPC handles this process exported to their blocks
// (process-wide, like the runtime itself).
var ipcExports struct {
	mu sync.Mutex
	m  map[ipcHandle]*ipcBlock
}

func registerExport(blk *ipcBlock) {
	ipcExports.mu.Lock()
	defer ipcExports.mu.Unlock()
	if ipcExports.m == nil {
		ipcExports.m = map[ipcHandle]*ipcBlock{}
	}
	ipcExports.m[blk.handle] = blk
}

func unregisterExport(blk *ipcBlock) {
	ipcExports.mu.Lock()
	defer ipcExports.mu.Unlock()
	if ipcExports.m[blk.handle] == blk {
		delete(ipcExports.m, blk.handle)
	}
}

// lookupExport returns the block of a handle this process exported, with a
// reference taken, or nil.
func lookupExport(h ipcHandle) *ipcBlock {
	ipcExports.mu.Lock()
	defer ipcExports.mu.Unlock()
	blk := ipcExports.m[h]
	if blk != nil {
		blk.refs.Add(1)
	}
	return blk
}

// ipcMemory is an IPC-shared allocation as one device of this process sees
// it: the exporter's own (owner), a same-process import of it (alias), or
// memory another process exported, opened with hipIpcOpenMemHandle.
type ipcMemory struct {
	d      *device
	ptr    backend.DevicePtr
	size   int
	blk    *ipcBlock // nil for memory opened from another process
	owner  bool
	closed atomic.Bool
}

// Ptr is the base address in this process.
func (a *ipcMemory) Ptr() backend.DevicePtr { return a.ptr }

// Size is the size in bytes (a multiple of the granularity).
func (a *ipcMemory) Size() int { return a.size }

// Export returns the 64 opaque bytes of the allocation's IPC handle as a
// backend.HandleFabric; only the owner can.
func (a *ipcMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.closed.Load() {
		return backend.Handle{}, backend.Errorf(backend.CodeClosed, "rocm: device %d: export of a closed allocation", a.d.index)
	}
	if !a.owner {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: imported allocations cannot be exported", a.d.index)
	}
	if kind != backend.HandleFabric {
		return backend.Handle{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: an IPC-handle allocation cannot be exported as %s", a.d.index, kind)
	}
	return backend.Handle{Kind: backend.HandleFabric, Opaque: append([]byte(nil), a.blk.handle[:]...), Size: a.size}, nil
}

// Close releases this view: the owner withdraws the export and, like an
// alias, drops its reference to the block; memory opened from another
// process is closed with hipIpcCloseMemHandle after the device's work.
func (a *ipcMemory) Close() error {
	if !a.closed.CompareAndSwap(false, true) {
		return nil
	}
	a.d.untrack(a)
	if a.blk == nil {
		return wrap(a.d.hip.IPCCloseHandle(a.d.index, a.ptr), "rocm: device %d: closing IPC memory at %#x", a.d.index, uint64(a.ptr))
	}
	if a.owner {
		unregisterExport(a.blk)
	}
	// hipFree, with the last reference, waits for the device's work.
	return a.blk.release()
}

func (a *ipcMemory) resourceKind() string { return "allocation" }

// AllocShareable returns zeroed memory another process can import, of the
// kind the backend shares memory with (Backend.Capabilities): hipMemCreate
// memory exported as a POSIX file descriptor (backend.HandleFD), or
// hipExtMallocWithFlags memory exported as an IPC handle, 64 opaque bytes
// (backend.HandleFabric). Both are uncached (fine-grained on ROCm 5,
// which has no uncached flag), so that signal pads in them are coherent
// between GPUs. The size is rounded up to the granularity. Descriptor
// memory is mapped for this device and the other devices this process has
// open that can reach it; IPC memory is reached by peers through peer
// access.
func (d *device) AllocShareable(ctx context.Context, size int, kind backend.HandleKind) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: shareable allocation of %d bytes", d.index, size)
	}
	if kind != backend.HandleFD && kind != backend.HandleFabric {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: unknown handle kind %d", d.index, kind)
	}
	if kind != d.b.share.kind {
		return nil, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: shareable memory travels as %s here, not %s handles (%s)",
			d.index, describeHandles(d.b.Capabilities()), kind, d.b.share.why)
	}
	size = alignUp(size, d.granularity)
	if kind == backend.HandleFD {
		access, err := d.b.accessDevices(d.index)
		if err != nil {
			return nil, err
		}
		m, err := d.hip.VMMCreate(d.index, size, d.b.share.vmmType, access)
		if err != nil {
			return nil, wrap(err, "rocm: device %d: creating %d bytes of %s descriptor-shareable memory", d.index, size, d.b.share.vmmType)
		}
		a := &vmmMemory{d: d, m: m}
		if err := d.track(a); err != nil {
			return nil, err
		}
		return a, nil
	}
	blk, err := d.allocIPC(size)
	if err != nil {
		return nil, err
	}
	a := &ipcMemory{d: d, ptr: blk.ptr, size: size, blk: blk, owner: true}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// allocIPC allocates an exportable block and registers its handle. It asks
// for uncached memory first and, on a runtime that does not know the flag
// (hipErrorInvalidValue: ROCm 5), for fine-grained memory from then on.
func (d *device) allocIPC(size int) (*ipcBlock, error) {
	d.b.mu.Lock()
	t := d.b.ipcType
	d.b.mu.Unlock()
	p, err := d.hip.MallocShareable(d.index, size, t)
	if t == memUncached && isHIP(err, hipErrorInvalidValue) {
		d.b.log.Info("rocm: the runtime has no uncached device memory; IPC-shared memory is fine-grained", "device", d.index)
		t = memFineGrained
		d.b.mu.Lock()
		d.b.ipcType = t
		d.b.mu.Unlock()
		p, err = d.hip.MallocShareable(d.index, size, t)
	}
	if err != nil {
		return nil, wrap(err, "rocm: device %d: allocating %d bytes of %s memory", d.index, size, t)
	}
	h, err := d.hip.IPCGetHandle(d.index, p)
	if err != nil {
		_ = d.hip.Free(d.index, p)
		return nil, wrap(err, "rocm: device %d: exporting %d bytes of %s memory as an IPC handle", d.index, size, t)
	}
	blk := &ipcBlock{d: d, ptr: p, size: size, handle: h}
	blk.refs.Store(1)
	registerExport(blk)
	return blk, nil
}

// Import maps memory exported by AllocShareable — in another process or
// this one — and grants this device read/write access to it. A file
// descriptor stays the caller's. An IPC handle this process exported maps
// to the exporter's address (after enabling peer access to its device);
// one from another process is opened with hipIpcOpenMemHandle.
func (d *device) Import(ctx context.Context, h backend.Handle) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if h.Size <= 0 || h.Size%d.granularity != 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: import of %d bytes (must be a positive multiple of %d)", d.index, h.Size, d.granularity)
	}
	if h.Kind != d.b.share.kind {
		return nil, backend.Errorf(backend.CodeNotSupported, "rocm: device %d: import of a %s handle; shareable memory travels as %s here",
			d.index, h.Kind, describeHandles(d.b.Capabilities()))
	}
	switch h.Kind {
	case backend.HandleFD:
		if h.File == nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: fd handle without a file", d.index)
		}
		m, err := d.hip.VMMImportFD(d.index, int(h.File.Fd()), h.Size, []int{d.index})
		runtime.KeepAlive(h.File)
		if err != nil {
			return nil, wrap(err, "rocm: device %d: importing %d bytes from a file descriptor", d.index, h.Size)
		}
		a := &vmmMemory{d: d, m: m, imported: true}
		if err := d.track(a); err != nil {
			return nil, err
		}
		return a, nil
	default:
		if len(h.Opaque) != ipcHandleSize {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: IPC handle of %d bytes, want %d", d.index, len(h.Opaque), ipcHandleSize)
		}
		var hd ipcHandle
		copy(hd[:], h.Opaque)
		if blk := lookupExport(hd); blk != nil {
			return d.importAlias(ctx, blk, h.Size)
		}
		p, err := d.hip.IPCOpenHandle(d.index, hd)
		if err != nil {
			return nil, wrap(err, "rocm: device %d: opening an IPC handle of %d bytes", d.index, h.Size)
		}
		a := &ipcMemory{d: d, ptr: p, size: h.Size}
		if err := d.track(a); err != nil {
			return nil, err
		}
		return a, nil
	}
}

// importAlias maps a block this process exported: its address, reached
// through peer access when it lives on another device.
func (d *device) importAlias(ctx context.Context, blk *ipcBlock, size int) (backend.Allocation, error) {
	if size != blk.size {
		_ = blk.release()
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: import of %d bytes of a %d-byte allocation", d.index, size, blk.size)
	}
	if owner := blk.d.index; owner != d.index {
		ok, err := d.b.PeerAccess(ctx, d.index, owner)
		if err != nil {
			_ = blk.release()
			return nil, err
		}
		if !ok {
			_ = blk.release()
			return nil, backend.Errorf(backend.CodeNotSupported, "rocm: device %d cannot access device %d's memory (no peer access)", d.index, owner)
		}
	}
	a := &ipcMemory{d: d, ptr: blk.ptr, size: size, blk: blk}
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
	_ backend.Allocation     = (*vmmMemory)(nil)
	_ backend.Allocation     = (*ipcMemory)(nil)
)
