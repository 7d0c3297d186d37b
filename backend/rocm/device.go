//go:build rocm

package rocm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/resources"
	"github.com/intranode/intranode/kernels"
	hipkernels "github.com/intranode/intranode/kernels/hip"
)

// resource is something a Device hands out and must see closed.
type resource interface {
	Close() error
	// resourceKind names the kind in Device.Close's report.
	resourceKind() string
}

// ipcGranularity is what IPC-shared allocations are rounded up to: 2 MiB,
// so that each has memory of its own (the runtime may place smaller
// allocations together, and ROCm 5 opens an IPC handle at the start of the
// block that holds it).
const ipcGranularity = 2 << 20

// device is an opened HIP device.
type device struct {
	b     *Backend
	index int
	info  backend.DeviceInfo
	hip   hipRuntime

	// granularity is the size shareable allocations are rounded up to.
	granularity int

	// res holds what the device handed out, for Close.
	res resources.Set
}

func newDevice(b *Backend, i int) (*device, error) {
	d := &device{b: b, index: i, info: b.devices[i].info, hip: b.hip}
	mapped, err := b.hip.DeviceAttribute(i, attrCanMapHostMemory)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: host memory mapping attribute", i)
	}
	if mapped == 0 {
		return nil, backend.Errorf(backend.CodeNotSupported, "rocm: device %d cannot map host memory", i)
	}
	d.granularity = ipcGranularity
	if b.share.kind == backend.HandleFD {
		g, err := b.hip.VMMGranularity(i, b.share.vmmType)
		if err != nil {
			return nil, wrap(err, "rocm: device %d: allocation granularity of %s memory", i, b.share.vmmType)
		}
		d.granularity = g
	}
	b.deviceOpened(i)
	b.log.Debug("rocm: device opened", "device", i, "granularity", d.granularity)
	return d, nil
}

// track registers r so Close can report and release it; it fails (and
// closes r) when the device is already closed.
func (d *device) track(r resource) error {
	if !d.res.Add(r, r.resourceKind()) {
		_ = r.Close()
		return backend.Errorf(backend.CodeClosed, "rocm: device %d is closed", d.index)
	}
	return nil
}

func (d *device) untrack(r resource) { d.res.Remove(r) }

// usable fails once the device is closed or ctx is done.
func (d *device) usable(ctx context.Context) error {
	if d.res.Closed() {
		return backend.Errorf(backend.CodeClosed, "rocm: device %d is closed", d.index)
	}
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return backend.Errorf(backend.CodeTimeout, "rocm: device %d: %w", d.index, err)
		}
	}
	return nil
}

// Index is the device's HIP ordinal.
func (d *device) Index() int { return d.index }

// Info describes the device.
func (d *device) Info() backend.DeviceInfo { return d.info }

// Granularity is the size shareable allocations are rounded up to: the
// virtual memory granularity where they travel as file descriptors, 2 MiB
// where they travel as IPC handles.
func (d *device) Granularity() int { return d.granularity }

// Alloc returns zeroed device memory from hipMalloc.
func (d *device) Alloc(ctx context.Context, size int) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: allocation of %d bytes", d.index, size)
	}
	p, err := d.hip.Malloc(d.index, size)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: allocating %d bytes", d.index, size)
	}
	a := &deviceMemory{d: d, ptr: p, size: size}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// AllocHost returns zeroed, pinned host memory mapped into the device's
// address space (portable: every device may use it).
func (d *device) AllocHost(ctx context.Context, size int) (backend.HostAllocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: host allocation of %d bytes", d.index, size)
	}
	host, p, err := d.hip.HostMalloc(d.index, size)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: allocating %d bytes of mapped host memory", d.index, size)
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
	return wrap(d.hip.CopyHtoD(d.index, dst, src), "rocm: device %d: copying %d bytes to %#x", d.index, len(src), uint64(dst))
}

// CopyFromDevice copies len(dst) bytes from src into dst.
func (d *device) CopyFromDevice(ctx context.Context, dst []byte, src backend.DevicePtr) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	return wrap(d.hip.CopyDtoH(d.index, dst, src), "rocm: device %d: copying %d bytes from %#x", d.index, len(dst), uint64(src))
}

// Memset sets n bytes at dst to v and returns once they are set.
func (d *device) Memset(ctx context.Context, dst backend.DevicePtr, v byte, n int) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	if n < 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: memset of %d bytes", d.index, n)
	}
	return wrap(d.hip.Memset(d.index, dst, v, n), "rocm: device %d: setting %d bytes at %#x", d.index, n, uint64(dst))
}

// NewStream creates a non-blocking stream: it never waits for the null
// stream, so other libraries' work cannot stall it.
func (d *device) NewStream(ctx context.Context) (backend.Stream, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	h, err := d.hip.StreamCreate(d.index)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: creating a stream", d.index)
	}
	s := &stream{d: d, h: h}
	if err := d.track(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewEvent creates an event; without timing it is created with
// hipEventDisableTiming, which makes recording and waiting cheaper.
func (d *device) NewEvent(ctx context.Context, timing bool) (backend.Event, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	h, err := d.hip.EventCreate(d.index, timing)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: creating an event", d.index)
	}
	e := &event{d: d, h: h, timing: timing}
	if err := d.track(e); err != nil {
		return nil, err
	}
	return e, nil
}

// LoadModule loads src.Image with hipModuleLoadData (a code object or an
// offload bundle) or, when there is no image, the built-in module
// kernels.ModuleName from the bundle embedded in package kernels/hip
// (INTRANODE_HIP_KERNELS overrides it with a file). A built-in image
// without code for this device's architecture fails saying which
// architectures it has.
func (d *device) LoadModule(ctx context.Context, src backend.ModuleSource) (backend.Module, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	image, name := src.Image, src.Name
	builtin := false
	if len(image) == 0 {
		switch name {
		case "":
			return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: module source has neither a name nor an image")
		case kernels.ModuleName:
			img, err := hipkernels.Load()
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil, backend.Wrap(backend.CodeNotFound, err, fmt.Sprintf("rocm: device %d: the %s image", d.index, name))
			case err != nil:
				return nil, wrap(err, "rocm: device %d: the %s image", d.index, name)
			}
			image, builtin = img, true
		default:
			return nil, backend.Errorf(backend.CodeNotFound, "rocm: no built-in module %q (have %q)", name, kernels.ModuleName)
		}
	}
	if name == "" {
		name = fmt.Sprintf("image(%d bytes)", len(image))
	}
	h, err := d.hip.ModuleLoad(d.index, image)
	if err != nil {
		if builtin && isHIP(err, hipErrorNoBinaryForGpu) {
			archs, _ := hipkernels.Architectures(image)
			return nil, backend.Wrap(backend.CodeNotSupported, err, fmt.Sprintf(
				"rocm: device %d (%s) is not among the architectures of the %s image (%s): build kernels/hip with OFFLOAD_ARCH=%s and point %s at it",
				d.index, d.info.Architecture, name, strings.Join(archs, ", "), strings.TrimSuffix(d.info.Architecture, "?"), hipkernels.EnvImage))
		}
		return nil, wrap(err, "rocm: device %d: loading module %s", d.index, name)
	}
	m := &module{d: d, h: h, name: name}
	if err := d.track(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Close releases the device handle. Streams, events, graphs, modules and
// allocations still open are released first (streams drain) and reported
// in the error.
func (d *device) Close() error {
	left, summary, first := d.res.Close()
	if !first {
		return nil
	}
	d.b.deviceClosed(d.index)
	d.b.log.Debug("rocm: device closed", "device", d.index, "leftovers", left)
	if left > 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d closed with %s still open (released them)",
			d.index, summary)
	}
	return nil
}

var _ backend.Device = (*device)(nil)
