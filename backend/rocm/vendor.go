//go:build rocm

package rocm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/kernels"
	hipkernels "github.com/intranode/intranode/kernels/hip"
)

// ipcGranularity is what IPC-shared allocations are rounded up to: 2 MiB,
// so that each has memory of its own (the runtime may place smaller
// allocations together, and ROCm 5 opens an IPC handle at the start of the
// block that holds it).
const ipcGranularity = 2 << 20

// vendor is what the shared GPU core asks of the ROCm backend
// (gpu.Vendor): the HIP runtime, whose contexts are device ordinals, and
// how HIP shares memory.
type vendor struct {
	hipRuntime
	b *Backend
}

func (vendor) Name() string      { return Name }
func (vendor) PeerQuery() string { return "hipDeviceCanAccessPeer" }

func (v vendor) EnablePeer(i, j int) error     { return v.EnablePeerAccess(i, j) }
func (vendor) Context(i int) (gpu.Ctx, error)  { return gpu.Ctx(i), nil }
func (vendor) CloseDevice(d *gpu.Device) error { return nil }
func (vendor) BuiltinImage() ([]byte, error)   { return hipkernels.Load() }
func (v vendor) CheckFabric(i int) (bool, string, error) {
	b := v.b
	if b.share.kind != backend.HandleFabric {
		return false, "memory is shared as file descriptors: " + b.share.why, nil
	}
	blk, err := b.allocIPC(i, ipcGranularity)
	if err != nil {
		return false, "IPC handle export failed: " + err.Error(), nil
	}
	unregisterExport(blk)
	return true, "", blk.release()
}

// OpenDevice checks that the device maps host memory and reads the
// granularity of shareable allocations: the virtual memory granularity
// where they travel as file descriptors, 2 MiB where they travel as IPC
// handles.
func (v vendor) OpenDevice(i int) (gpu.DeviceSetup, error) {
	mapped, err := v.DeviceAttribute(i, attrCanMapHostMemory)
	if err != nil {
		return gpu.DeviceSetup{}, gpu.Wrap(err, "rocm: device %d: host memory mapping attribute", i)
	}
	if mapped == 0 {
		return gpu.DeviceSetup{}, backend.Errorf(backend.CodeNotSupported, "rocm: device %d cannot map host memory", i)
	}
	g := ipcGranularity
	if v.b.share.kind == backend.HandleFD {
		if g, err = v.VMMGranularity(i, v.b.share.vmmType); err != nil {
			return gpu.DeviceSetup{}, gpu.Wrap(err, "rocm: device %d: allocation granularity of %s memory", i, v.b.share.vmmType)
		}
	}
	return gpu.DeviceSetup{Ctx: gpu.Ctx(i), Granularity: g}, nil
}

// ExplainLoad says which architectures the built-in image has when it has
// none for the device.
func (vendor) ExplainLoad(d *gpu.Device, image []byte, err error) error {
	if !isHIP(err, hipErrorNoBinaryForGpu) {
		return nil
	}
	archs, _ := hipkernels.Architectures(image)
	arch := d.Info().Architecture
	return backend.Wrap(backend.CodeNotSupported, err, fmt.Sprintf(
		"rocm: device %d (%s) is not among the architectures of the %s image (%s): build kernels/hip with OFFLOAD_ARCH=%s and point %s at it",
		d.Index(), arch, kernels.ModuleName, strings.Join(archs, ", "), strings.TrimSuffix(arch, "?"), hipkernels.EnvImage))
}

// AllocShareable returns memory of the kind the backend shares memory
// with (Backend.Capabilities): hipMemCreate memory exported as a POSIX
// file descriptor (backend.HandleFD), or hipExtMallocWithFlags memory
// exported as an IPC handle, 64 opaque bytes (backend.HandleFabric). Both
// are uncached (fine-grained on ROCm 5, which has no uncached flag), so
// that signal pads in them are coherent between GPUs. Descriptor memory is
// mapped for this device and the other devices this process has open that
// can reach it; IPC memory is reached by peers through peer access.
func (v vendor) AllocShareable(ctx context.Context, d *gpu.Device, size int, kind backend.HandleKind) (gpu.Shared, error) {
	b := v.b
	if kind != b.share.kind {
		return nil, d.Errorf(backend.CodeNotSupported, "shareable memory travels as %s here, not %s handles (%s)",
			describeHandles(b.Capabilities()), kind, b.share.why)
	}
	if kind == backend.HandleFD {
		access, err := b.AccessDevices(d.Index())
		if err != nil {
			return nil, err
		}
		m, err := v.VMMCreate(d.Index(), size, b.share.vmmType, access)
		if err != nil {
			return nil, d.Wrap(err, "creating %d bytes of %s descriptor-shareable memory", size, b.share.vmmType)
		}
		return &vmmMemory{d: d, hip: v, m: m}, nil
	}
	blk, err := b.allocIPC(d.Index(), size)
	if err != nil {
		return nil, err
	}
	return &ipcMemory{d: d, ptr: blk.ptr, size: size, blk: blk, owner: true}, nil
}

// Import maps memory exported by AllocShareable. A file descriptor stays
// the caller's. An IPC handle this process exported maps to the exporter's
// address (after checking peer access to its device); one from another
// process is opened with hipIpcOpenMemHandle.
func (v vendor) Import(ctx context.Context, d *gpu.Device, h backend.Handle) (gpu.Shared, error) {
	if h.Kind != v.b.share.kind {
		return nil, d.Errorf(backend.CodeNotSupported, "import of a %s handle; shareable memory travels as %s here",
			h.Kind, describeHandles(v.b.Capabilities()))
	}
	if h.Kind == backend.HandleFD {
		m, err := v.VMMImportFD(d.Index(), int(h.File.Fd()), h.Size, []int{d.Index()})
		runtime.KeepAlive(h.File)
		if err != nil {
			return nil, d.Wrap(err, "importing %d bytes from a file descriptor", h.Size)
		}
		return &vmmMemory{d: d, hip: v, m: m, imported: true}, nil
	}
	if len(h.Opaque) != ipcHandleSize {
		return nil, d.Errorf(backend.CodeInvalidArgument, "IPC handle of %d bytes, want %d", len(h.Opaque), ipcHandleSize)
	}
	var hd ipcHandle
	copy(hd[:], h.Opaque)
	if blk := lookupExport(hd); blk != nil {
		return v.importAlias(ctx, d, blk, h.Size)
	}
	p, err := v.IPCOpenHandle(d.Index(), hd)
	if err != nil {
		return nil, d.Wrap(err, "opening an IPC handle of %d bytes", h.Size)
	}
	return &ipcMemory{d: d, hip: v, ptr: p, size: h.Size}, nil
}

// importAlias maps a block this process exported: its address, reached
// through peer access when it lives on another device.
func (v vendor) importAlias(ctx context.Context, d *gpu.Device, blk *ipcBlock, size int) (gpu.Shared, error) {
	if size != blk.size {
		_ = blk.release()
		return nil, d.Errorf(backend.CodeInvalidArgument, "import of %d bytes of a %d-byte allocation", size, blk.size)
	}
	if owner := blk.dev; owner != d.Index() {
		ok, err := v.b.PeerAccess(ctx, d.Index(), owner)
		if err != nil {
			_ = blk.release()
			return nil, err
		}
		if !ok {
			_ = blk.release()
			return nil, backend.Errorf(backend.CodeNotSupported, "rocm: device %d cannot access device %d's memory (no peer access)", d.Index(), owner)
		}
	}
	return &ipcMemory{d: d, ptr: blk.ptr, size: size, blk: blk}, nil
}

// allocIPC allocates an exportable block on device dev and registers its
// handle. It asks for uncached memory first and, on a runtime that does
// not know the flag (hipErrorInvalidValue: ROCm 5), for fine-grained
// memory from then on.
func (b *Backend) allocIPC(dev, size int) (*ipcBlock, error) {
	b.mu.Lock()
	t := b.ipcType
	b.mu.Unlock()
	p, err := b.hip.MallocShareable(dev, size, t)
	if t == memUncached && isHIP(err, hipErrorInvalidValue) {
		b.log.Info("rocm: the runtime has no uncached device memory; IPC-shared memory is fine-grained", "device", dev)
		t = memFineGrained
		b.mu.Lock()
		b.ipcType = t
		b.mu.Unlock()
		p, err = b.hip.MallocShareable(dev, size, t)
	}
	if err != nil {
		return nil, gpu.Wrap(err, "rocm: device %d: allocating %d bytes of %s memory", dev, size, t)
	}
	h, err := b.hip.IPCGetHandle(dev, p)
	if err != nil {
		_ = b.hip.Free(gpu.Ctx(dev), p)
		return nil, gpu.Wrap(err, "rocm: device %d: exporting %d bytes of %s memory as an IPC handle", dev, size, t)
	}
	blk := &ipcBlock{hip: b.hip, dev: dev, ptr: p, size: size, handle: h}
	blk.refs.Store(1)
	registerExport(blk)
	return blk, nil
}

// vmmMemory is memory created or imported through the virtual memory
// management API, shared as file descriptors.
type vmmMemory struct {
	d        *gpu.Device
	hip      hipRuntime
	m        vmmMapping
	imported bool
}

func (a *vmmMemory) Ptr() backend.DevicePtr { return a.m.ptr }
func (a *vmmMemory) Size() int              { return a.m.size }

// Export returns a new file descriptor the caller owns; only
// backend.HandleFD, and not for imported memory.
func (a *vmmMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.imported {
		return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "imported allocations cannot be exported")
	}
	if kind != backend.HandleFD {
		return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "a file-descriptor allocation cannot be exported as %s", kind)
	}
	fd, err := a.hip.VMMExportFD(a.d.Index(), a.m)
	if err != nil {
		return backend.Handle{}, a.d.Wrap(err, "exporting a file descriptor")
	}
	// Like every descriptor Go opens: not inherited across exec unless
	// passed on purpose.
	syscall.CloseOnExec(fd)
	return backend.Handle{Kind: backend.HandleFD, File: os.NewFile(uintptr(fd), "rocm-shareable"), Size: a.m.size}, nil
}

// Release waits for the device's work, then unmaps the memory, frees the
// address range and releases the allocation handle.
func (a *vmmMemory) Release() error {
	return a.d.Wrap(a.hip.VMMRelease(a.d.Index(), a.m), "releasing shareable memory at %#x", uint64(a.m.ptr))
}

// ipcBlock is memory from hipExtMallocWithFlags exported as an IPC handle.
// Ranks in the process that made it use its address directly (HIP refuses
// to open a handle in the process that created it), so the block is
// reference counted: the owner's allocation and every in-process import
// hold it, and it is freed when the last lets go.
type ipcBlock struct {
	hip    hipRuntime
	dev    int
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
	return gpu.Wrap(blk.hip.Free(gpu.Ctx(blk.dev), blk.ptr), "rocm: device %d: freeing shareable memory at %#x", blk.dev, uint64(blk.ptr))
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
	d     *gpu.Device
	hip   hipRuntime
	ptr   backend.DevicePtr
	size  int
	blk   *ipcBlock // nil for memory opened from another process
	owner bool
}

func (a *ipcMemory) Ptr() backend.DevicePtr { return a.ptr }
func (a *ipcMemory) Size() int              { return a.size }

// Export returns the 64 opaque bytes of the allocation's IPC handle as a
// backend.HandleFabric; only the owner can.
func (a *ipcMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if !a.owner {
		return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "imported allocations cannot be exported")
	}
	if kind != backend.HandleFabric {
		return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "an IPC-handle allocation cannot be exported as %s", kind)
	}
	return backend.Handle{Kind: backend.HandleFabric, Opaque: append([]byte(nil), a.blk.handle[:]...), Size: a.size}, nil
}

// Release releases this view: the owner withdraws the export and, like an
// alias, drops its reference to the block; memory opened from another
// process is closed with hipIpcCloseMemHandle after the device's work.
func (a *ipcMemory) Release() error {
	if a.blk == nil {
		return a.d.Wrap(a.hip.IPCCloseHandle(a.d.Index(), a.ptr), "closing IPC memory at %#x", uint64(a.ptr))
	}
	if a.owner {
		unregisterExport(a.blk)
	}
	// hipFree, with the last reference, waits for the device's work.
	return a.blk.release()
}
