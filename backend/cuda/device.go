//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/resources"
	"github.com/intranode/intranode/kernels"
	cudakernels "github.com/intranode/intranode/kernels/cuda"
)

// resource is something a Device hands out and must see closed.
type resource interface {
	Close() error
	// resourceKind names the kind in Device.Close's report.
	resourceKind() string
}

// device is an opened CUDA device: a handle that holds the device's primary
// context until it is closed.
type device struct {
	b       *Backend
	index   int
	ordinal int
	ctx     ctxHandle
	info    backend.DeviceInfo

	// granularity is the VMM allocation granularity for POSIX file
	// descriptor handles; 0 when vmmErr is set.
	granularity int
	vmmErr      error

	// res holds what the device handed out, for Close.
	res resources.Set
}

func newDevice(b *Backend, i int) (*device, error) {
	e := b.devices[i]
	c, err := ctxRetain(e.ordinal)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: retaining the primary context", i)
	}
	d := &device{b: b, index: i, ordinal: e.ordinal, ctx: c, info: e.info}
	if err := d.initMemory(); err != nil {
		_ = ctxRelease(e.ordinal)
		return nil, err
	}
	b.deviceOpened(i)
	b.log.Debug("cuda: device opened", "device", i, "granularity", d.granularity)
	return d, nil
}

// initMemory reads what shareable and host-mapped allocations need.
func (d *device) initMemory() error {
	vmm, err := deviceAttr(d.ordinal, attrVirtualMemory)
	if err != nil {
		return wrap(err, "cuda: device %d: virtual memory management attribute", d.index)
	}
	fd, err := deviceAttr(d.ordinal, attrHandlePOSIXFD)
	if err != nil {
		return wrap(err, "cuda: device %d: POSIX file descriptor handle attribute", d.index)
	}
	if vmm == 0 || fd == 0 {
		d.vmmErr = backend.Errorf(backend.CodeNotSupported,
			"cuda: device %d does not support shareable memory (virtual memory management %d, POSIX file descriptor handles %d)", d.index, vmm, fd)
	} else {
		g, err := vmmGranularity(d.ordinal, handleTypePOSIXFD)
		if err != nil {
			return wrap(err, "cuda: device %d: allocation granularity", d.index)
		}
		d.granularity = g
	}
	mapped, err := deviceAttr(d.ordinal, attrCanMapHostMemory)
	if err != nil {
		return wrap(err, "cuda: device %d: host memory mapping attribute", d.index)
	}
	uva, err := deviceAttr(d.ordinal, attrUnifiedAddressing)
	if err != nil {
		return wrap(err, "cuda: device %d: unified addressing attribute", d.index)
	}
	if mapped == 0 || uva == 0 {
		return backend.Errorf(backend.CodeNotSupported, "cuda: device %d cannot map host memory or lacks unified addressing", d.index)
	}
	return nil
}

// track registers r so Close can report and release it; it fails (and
// closes r) when the device is already closed.
func (d *device) track(r resource) error {
	if !d.res.Add(r, r.resourceKind()) {
		_ = r.Close()
		return backend.Errorf(backend.CodeClosed, "cuda: device %d is closed", d.index)
	}
	return nil
}

func (d *device) untrack(r resource) { d.res.Remove(r) }

// usable fails once the device is closed or ctx is done.
func (d *device) usable(ctx context.Context) error {
	if d.res.Closed() {
		return backend.Errorf(backend.CodeClosed, "cuda: device %d is closed", d.index)
	}
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return backend.Errorf(backend.CodeTimeout, "cuda: device %d: %w", d.index, err)
		}
	}
	return nil
}

// Index is the device's CUDA ordinal.
func (d *device) Index() int { return d.index }

// Info describes the device.
func (d *device) Info() backend.DeviceInfo { return d.info }

// Granularity is the size shareable allocations are rounded up to; 0 on a
// device without the virtual memory management API, where AllocShareable
// returns backend.ErrNotSupported.
func (d *device) Granularity() int { return d.granularity }

// Alloc returns zeroed device memory from cuMemAlloc.
func (d *device) Alloc(ctx context.Context, size int) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: allocation of %d bytes", d.index, size)
	}
	p, err := memAlloc(d.ctx, size)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: allocating %d bytes", d.index, size)
	}
	a := &deviceMemory{d: d, ptr: p, size: size}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// AllocHost returns zeroed, pinned host memory mapped into the device's
// address space (portable: every context may use it).
func (d *device) AllocHost(ctx context.Context, size int) (backend.HostAllocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: host allocation of %d bytes", d.index, size)
	}
	host, p, err := hostAlloc(d.ctx, size)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: allocating %d bytes of mapped host memory", d.index, size)
	}
	a := &hostMemory{d: d, host: host, ptr: p, size: size}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// CopyToDevice copies src to dst and returns once the copy is complete.
func (d *device) CopyToDevice(ctx context.Context, dst backend.DevicePtr, src []byte) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	return wrap(copyHtoD(d.ctx, dst, src), "cuda: device %d: copying %d bytes to %#x", d.index, len(src), uint64(dst))
}

// CopyFromDevice copies len(dst) bytes from src into dst.
func (d *device) CopyFromDevice(ctx context.Context, dst []byte, src backend.DevicePtr) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	return wrap(copyDtoH(d.ctx, dst, src), "cuda: device %d: copying %d bytes from %#x", d.index, len(dst), uint64(src))
}

// Memset sets n bytes at dst to v and returns once they are set.
func (d *device) Memset(ctx context.Context, dst backend.DevicePtr, v byte, n int) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	if n < 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: memset of %d bytes", d.index, n)
	}
	return wrap(memset(d.ctx, dst, v, n), "cuda: device %d: setting %d bytes at %#x", d.index, n, uint64(dst))
}

// NewStream creates a non-blocking stream: it never waits for the legacy
// default stream, so other libraries' work cannot stall it.
func (d *device) NewStream(ctx context.Context) (backend.Stream, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	h, err := streamCreate(d.ctx)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: creating a stream", d.index)
	}
	s := &stream{d: d, h: h}
	if err := d.track(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewEvent creates an event; without timing it is created with
// CU_EVENT_DISABLE_TIMING, which makes recording and waiting cheaper.
func (d *device) NewEvent(ctx context.Context, timing bool) (backend.Event, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	var flags uint
	if !timing {
		flags = eventFlagDisableTiming
	}
	h, err := eventCreate(d.ctx, flags)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: creating an event", d.index)
	}
	e := &event{d: d, h: h, timing: timing}
	if err := d.track(e); err != nil {
		return nil, err
	}
	return e, nil
}

// LoadModule loads src.Image with cuModuleLoadData (cubin, fatbin or PTX)
// or, when there is no image, the built-in module kernels.ModuleName from
// the fatbin embedded in package kernels/cuda (INTRANODE_CUDA_KERNELS
// overrides it with a file).
func (d *device) LoadModule(ctx context.Context, src backend.ModuleSource) (backend.Module, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	image, name := src.Image, src.Name
	if len(image) == 0 {
		switch name {
		case "":
			return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: module source has neither a name nor an image")
		case kernels.ModuleName:
			img, err := cudakernels.Load()
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil, backend.Wrap(backend.CodeNotFound, err, fmt.Sprintf("cuda: device %d: the %s image", d.index, name))
			case err != nil:
				return nil, wrap(err, "cuda: device %d: the %s image", d.index, name)
			case len(img) == 0:
				return nil, backend.Errorf(backend.CodeNotFound, "cuda: device %d: the %s image is empty (build kernels/cuda)", d.index, name)
			}
			image = img
		default:
			return nil, backend.Errorf(backend.CodeNotFound, "cuda: no built-in module %q (have %q)", name, kernels.ModuleName)
		}
	}
	if name == "" {
		name = fmt.Sprintf("image(%d bytes)", len(image))
	}
	h, err := moduleLoad(d.ctx, image)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: loading module %s", d.index, name)
	}
	m := &module{d: d, h: h, name: name}
	if err := d.track(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Close releases the device's primary context. Streams, events, graphs,
// modules and allocations still open are released first (streams drain) and
// reported in the error.
func (d *device) Close() error {
	left, summary, first := d.res.Close()
	if !first {
		return nil
	}
	d.b.deviceClosed(d.index)
	err := wrap(ctxRelease(d.ordinal), "cuda: device %d: releasing the primary context", d.index)
	d.b.log.Debug("cuda: device closed", "device", d.index, "leftovers", left)
	if left > 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d closed with %s still open (released them)",
			d.index, summary)
	}
	return err
}

var _ backend.Device = (*device)(nil)
