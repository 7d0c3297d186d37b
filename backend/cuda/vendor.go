//go:build cuda

package cuda

import (
	"context"
	"os"
	"runtime"
	"syscall"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	cudakernels "github.com/intranode/intranode/kernels/cuda"
)

// vendor is what the shared GPU core asks of the CUDA backend beyond the
// driver calls (gpu.Vendor).
type vendor struct {
	gpu.Runtime
	b *Backend
}

// deviceExt is the CUDA part of an opened device.
type deviceExt struct {
	ordinal int
	// vmmErr says why the device cannot make shareable memory; nil when
	// it can.
	vmmErr error
}

func (vendor) Name() string      { return Name }
func (vendor) PeerQuery() string { return "cuDeviceCanAccessPeer" }

func (v vendor) CanAccessPeer(i, j int) (bool, error) {
	return canAccessPeer(v.b.devices[i].ordinal, v.b.devices[j].ordinal)
}

// EnablePeer enables access from i's primary context to j's.
func (v vendor) EnablePeer(i, j int) error {
	ci, err := v.b.context(i)
	if err != nil {
		return err
	}
	cj, err := v.b.context(j)
	if err != nil {
		return err
	}
	return enablePeer(ci, cj)
}

func (v vendor) Context(i int) (gpu.Ctx, error) { return v.b.context(i) }

// OpenDevice retains the device's primary context for the new handle and
// reads what shareable and host-mapped allocations need.
func (v vendor) OpenDevice(i int) (gpu.DeviceSetup, error) {
	e := v.b.devices[i]
	c, err := ctxRetain(e.ordinal)
	if err != nil {
		return gpu.DeviceSetup{}, gpu.Wrap(err, "cuda: device %d: retaining the primary context", i)
	}
	ext := &deviceExt{ordinal: e.ordinal}
	g, err := initMemory(i, ext)
	if err != nil {
		_ = ctxRelease(e.ordinal)
		return gpu.DeviceSetup{}, err
	}
	return gpu.DeviceSetup{Ctx: c, Granularity: g, Early: e.early, Ext: ext}, nil
}

// initMemory checks the device's attributes and returns the granularity of
// descriptor-shareable allocations (0, with ext.vmmErr set, when it has
// none).
func initMemory(i int, ext *deviceExt) (int, error) {
	attr := func(a int, what string) (int, error) {
		v, err := deviceAttr(ext.ordinal, a)
		return v, gpu.Wrap(err, "cuda: device %d: %s attribute", i, what)
	}
	vmm, err := attr(attrVirtualMemory, "virtual memory management")
	if err != nil {
		return 0, err
	}
	fd, err := attr(attrHandlePOSIXFD, "POSIX file descriptor handle")
	if err != nil {
		return 0, err
	}
	g := 0
	if vmm == 0 || fd == 0 {
		ext.vmmErr = backend.Errorf(backend.CodeNotSupported,
			"cuda: device %d does not support shareable memory (virtual memory management %d, POSIX file descriptor handles %d)", i, vmm, fd)
	} else if g, err = vmmGranularity(ext.ordinal, handleTypePOSIXFD); err != nil {
		return 0, gpu.Wrap(err, "cuda: device %d: allocation granularity", i)
	}
	mapped, err := attr(attrCanMapHostMemory, "host memory mapping")
	if err != nil {
		return 0, err
	}
	uva, err := attr(attrUnifiedAddressing, "unified addressing")
	if err != nil {
		return 0, err
	}
	if mapped == 0 || uva == 0 {
		return 0, backend.Errorf(backend.CodeNotSupported, "cuda: device %d cannot map host memory or lacks unified addressing", i)
	}
	return g, nil
}

// CloseDevice releases the handle's primary context.
func (vendor) CloseDevice(d *gpu.Device) error {
	return d.Wrap(ctxRelease(d.Ext.(*deviceExt).ordinal), "releasing the primary context")
}

// AllocShareable creates memory with cuMemCreate that can be exported as a
// POSIX file descriptor (HandleFD) or, on devices where FabricSupported
// says yes, a fabric handle (HandleFabric), mapped read/write for this
// device and the other devices this process has open that can access it
// as peers.
func (v vendor) AllocShareable(ctx context.Context, d *gpu.Device, size int, kind backend.HandleKind) (gpu.Shared, error) {
	ext := d.Ext.(*deviceExt)
	if ext.vmmErr != nil {
		return nil, ext.vmmErr
	}
	types := handleTypePOSIXFD
	if kind == backend.HandleFabric {
		ok, err := v.b.FabricSupported(ctx, d.Index())
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, d.Errorf(backend.CodeNotSupported, "fabric handles are not supported (use file descriptors)")
		}
		types = handleTypeFabric
	}
	access, err := v.b.AccessDevices(d.Index())
	if err != nil {
		return nil, err
	}
	for k, i := range access {
		access[k] = v.b.devices[i].ordinal
	}
	m, err := vmmCreate(d.Ctx(), ext.ordinal, types, size, access)
	if err != nil {
		return nil, d.Wrap(err, "creating %d bytes of %s-shareable memory", size, kind)
	}
	return &sharedMemory{d: d, m: m, kind: kind}, nil
}

// Import maps memory exported by AllocShareable and grants this device
// read/write access to it.
func (vendor) Import(ctx context.Context, d *gpu.Device, h backend.Handle) (gpu.Shared, error) {
	ext := d.Ext.(*deviceExt)
	if ext.vmmErr != nil {
		return nil, ext.vmmErr
	}
	access := []int{ext.ordinal}
	var (
		m   vmmMapping
		err error
	)
	switch h.Kind {
	case backend.HandleFD:
		m, err = vmmImportFD(d.Ctx(), int(h.File.Fd()), h.Size, access)
		runtime.KeepAlive(h.File)
	case backend.HandleFabric:
		if len(h.Opaque) != fabricHandleSize {
			return nil, d.Errorf(backend.CodeInvalidArgument, "fabric handle of %d bytes, want %d", len(h.Opaque), fabricHandleSize)
		}
		m, err = vmmImportFabric(d.Ctx(), h.Opaque, h.Size, access)
	default:
		return nil, d.Errorf(backend.CodeInvalidArgument, "import of a %s handle", h.Kind)
	}
	if err != nil {
		return nil, d.Wrap(err, "importing %d bytes from a %s handle", h.Size, h.Kind)
	}
	return &sharedMemory{d: d, m: m, kind: h.Kind, imported: true}, nil
}

// CheckFabric: NVML's fabric state must not be "Not Supported", and a real
// allocation with a fabric handle must export and import back.
func (v vendor) CheckFabric(i int) (bool, string, error) {
	b := v.b
	if b.nvml == nil {
		return false, b.nvmlErr.Error(), nil
	}
	st, err := b.fabricState(i)
	if err != nil {
		return false, "", err
	}
	if !st.Usable {
		return false, "NVML fabric state is " + st.String(), nil
	}
	c, err := b.context(i)
	if err != nil {
		return false, "", err
	}
	if err := fabricRoundTrip(c, b.devices[i].ordinal); err != nil {
		return false, "fabric handle round trip failed: " + err.Error(), nil
	}
	return true, "", nil
}

// BuiltinImage is the fatbin embedded in package kernels/cuda
// (INTRANODE_CUDA_KERNELS overrides it with a file).
func (vendor) BuiltinImage() ([]byte, error) { return cudakernels.Load() }

func (vendor) ExplainLoad(*gpu.Device, []byte, error) error { return nil }

// sharedMemory is memory created or imported through the virtual memory
// management API.
type sharedMemory struct {
	d        *gpu.Device
	m        vmmMapping
	kind     backend.HandleKind
	imported bool
}

func (a *sharedMemory) Ptr() backend.DevicePtr { return a.m.ptr }
func (a *sharedMemory) Size() int              { return a.m.size }

// Export returns a new file descriptor the caller owns for
// backend.HandleFD, the 64 opaque bytes of a fabric handle for
// backend.HandleFabric. Only the kind the allocation was made for can be
// exported; imported memory cannot be re-exported.
func (a *sharedMemory) Export(kind backend.HandleKind) (backend.Handle, error) {
	if a.imported {
		return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "imported allocations cannot be exported")
	}
	if kind != a.kind {
		return backend.Handle{}, a.d.Errorf(backend.CodeNotSupported, "a %s allocation cannot be exported as %s", a.kind, kind)
	}
	if kind == backend.HandleFD {
		fd, err := vmmExportFD(a.d.Ctx(), a.m)
		if err != nil {
			return backend.Handle{}, a.d.Wrap(err, "exporting a file descriptor")
		}
		// Like every descriptor Go opens: not inherited across exec
		// unless passed on purpose (exec.Cmd.ExtraFiles).
		syscall.CloseOnExec(fd)
		return backend.Handle{Kind: kind, File: os.NewFile(uintptr(fd), "cuda-shareable"), Size: a.m.size}, nil
	}
	opaque, err := vmmExportFabric(a.d.Ctx(), a.m)
	if err != nil {
		return backend.Handle{}, a.d.Wrap(err, "exporting a fabric handle")
	}
	return backend.Handle{Kind: kind, Opaque: opaque, Size: a.m.size}, nil
}

// Release waits for the device's queued work, then unmaps the memory,
// frees the address range and releases the allocation handle.
func (a *sharedMemory) Release() error {
	return a.d.Wrap(vmmRelease(a.d.Ctx(), a.m), "releasing shareable memory at %#x", uint64(a.m.ptr))
}
