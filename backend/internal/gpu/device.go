package gpu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/resources"
	"github.com/intranode/intranode/backend/internal/spans"
	"github.com/intranode/intranode/kernels"
)

// resource is something a Device hands out and must see closed.
type resource interface {
	Close() error
	// resourceKind names the kind in Device.Close's report.
	resourceKind() string
}

// Device is an opened GPU: a context the vendor prepared and what the
// caller was handed out on it.
type Device struct {
	c     *Core
	v     Vendor
	index int
	ctx   Ctx
	info  backend.DeviceInfo
	gran  int
	early bool
	// Ext is the vendor's own per-device state (DeviceSetup.Ext).
	Ext any

	// res holds what the device handed out, for Close.
	res resources.Set
	// own are the address ranges of its live allocations (CheckRange).
	own spans.Table
}

func (c *Core) openDevice(i int) (*Device, error) {
	setup, err := c.v.OpenDevice(i)
	if err != nil {
		return nil, err
	}
	d := &Device{c: c, v: c.v, index: i, ctx: setup.Ctx, info: c.infos[i], gran: setup.Granularity, early: setup.Early, Ext: setup.Ext}
	c.countOpen(i, 1)
	c.log.Debug(c.v.Name()+": device opened", "device", i, "granularity", d.gran)
	return d, nil
}

// Core is the backend the device was opened from.
func (d *Device) Core() *Core { return d.c }

// Ctx is the context every call on the device uses.
func (d *Device) Ctx() Ctx { return d.ctx }

// Errorf makes an error of code whose message starts with the backend's
// name and the device ("cuda: device 1: ...").
func (d *Device) Errorf(code backend.Code, format string, args ...any) error {
	return backend.Errorf(code, "%s: device %d: "+format, append([]any{d.v.Name(), d.index}, args...)...)
}

// Wrap is the package's Wrap with the backend's name and the device in
// front of the message.
func (d *Device) Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return Wrap(err, "%s: device %d: %s", d.v.Name(), d.index, fmt.Sprintf(format, args...))
}

// track registers r so Close can report and release it; it fails (and
// closes r) when the device is already closed.
func (d *Device) track(r resource) error {
	if !d.res.Add(r, r.resourceKind()) {
		_ = r.Close()
		return backend.Errorf(backend.CodeClosed, "%s: device %d is closed", d.v.Name(), d.index)
	}
	if a, ok := r.(backend.Allocation); ok {
		d.own.Add(a.Ptr(), a.Size())
	}
	return nil
}

// untrack forgets a, which is being freed.
func (d *Device) untrack(a backend.Allocation) {
	d.own.Remove(a.Ptr())
	d.res.Remove(a)
}

// usable fails once the device is closed or ctx is done.
func (d *Device) usable(ctx context.Context) error {
	if d.res.Closed() {
		return backend.Errorf(backend.CodeClosed, "%s: device %d is closed", d.v.Name(), d.index)
	}
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return backend.Errorf(backend.CodeTimeout, "%s: device %d: %w", d.v.Name(), d.index, err)
		}
	}
	return nil
}

// Index is the device's index on the host.
func (d *Device) Index() int { return d.index }

// Info describes the device.
func (d *Device) Info() backend.DeviceInfo { return d.info }

// Granularity is the size shareable allocations are rounded up to; 0 on a
// device that cannot make them, where AllocShareable fails with
// backend.ErrNotSupported.
func (d *Device) Granularity() int { return d.gran }

// CheckRange fails with backend.ErrInvalidArgument when [p, p+n) runs past
// the end of the allocation holding p (backend.RangeChecker): one of the
// device's own, looked up without a driver call, else the one the driver
// knows (cuMemGetAddressRange, hipMemGetAddressRange). Where the driver
// knows no allocation at p either (memory it does not track, such as
// pageable host memory a device may reach through HMM), it gives no
// verdict and returns nil: the launch reports what the device finds.
func (d *Device) CheckRange(p backend.DevicePtr, n int) error {
	if n <= 0 {
		return nil
	}
	if ok, err := d.own.Check(p, n); ok {
		return d.wrapRange(err)
	}
	base, size, err := d.v.AddressRange(d.ctx, p)
	if err != nil {
		return nil // no verdict, see above
	}
	return d.wrapRange(spans.Past(p, n, spans.Span{Base: base, Size: size}))
}

// wrapRange puts the backend and device in front of a range error.
func (d *Device) wrapRange(err error) error {
	if err == nil {
		return nil
	}
	return d.Wrap(err, "checking an argument's range")
}

// Alloc returns zeroed device memory.
func (d *Device) Alloc(ctx context.Context, size int) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, d.Errorf(backend.CodeInvalidArgument, "allocation of %d bytes", size)
	}
	p, err := d.v.Malloc(d.ctx, size)
	if err != nil {
		return nil, d.Wrap(err, "allocating %d bytes", size)
	}
	a := &plainMemory{d: d, ptr: p, size: size}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// AllocHost returns zeroed, pinned host memory mapped into the device's
// address space (portable: every device may use it).
func (d *Device) AllocHost(ctx context.Context, size int) (backend.HostAllocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, d.Errorf(backend.CodeInvalidArgument, "host allocation of %d bytes", size)
	}
	host, p, err := d.v.HostMalloc(d.ctx, size)
	if err != nil {
		return nil, d.Wrap(err, "allocating %d bytes of mapped host memory", size)
	}
	a := &hostMemory{plainMemory: plainMemory{d: d, ptr: p, size: size}, host: host}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// AllocShareable returns zeroed memory another process can import, made
// by the vendor for the given handle kind and rounded up to the
// granularity.
func (d *Device) AllocShareable(ctx context.Context, size int, kind backend.HandleKind) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, d.Errorf(backend.CodeInvalidArgument, "shareable allocation of %d bytes", size)
	}
	if kind != backend.HandleFD && kind != backend.HandleFabric {
		return nil, d.Errorf(backend.CodeInvalidArgument, "unknown handle kind %d", kind)
	}
	m, err := d.v.AllocShareable(ctx, d, AlignUp(size, d.gran), kind)
	if err != nil {
		return nil, err
	}
	return d.trackShared(m)
}

// Import maps memory exported by AllocShareable — in another process or
// this one — and grants this device read/write access to it. A file
// descriptor stays the caller's.
func (d *Device) Import(ctx context.Context, h backend.Handle) (backend.Allocation, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if d.gran > 0 && (h.Size <= 0 || h.Size%d.gran != 0) {
		return nil, d.Errorf(backend.CodeInvalidArgument, "import of %d bytes (must be a positive multiple of %d)", h.Size, d.gran)
	}
	if h.Kind == backend.HandleFD && h.File == nil {
		return nil, d.Errorf(backend.CodeInvalidArgument, "fd handle without a file")
	}
	m, err := d.v.Import(ctx, d, h)
	if err != nil {
		return nil, err
	}
	return d.trackShared(m)
}

func (d *Device) trackShared(m Shared) (backend.Allocation, error) {
	a := &sharedMemory{d: d, m: m}
	if err := d.track(a); err != nil {
		return nil, err
	}
	return a, nil
}

// CopyToDevice copies src to dst and returns once the copy is complete.
func (d *Device) CopyToDevice(ctx context.Context, dst backend.DevicePtr, src []byte) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	return d.Wrap(d.v.CopyHtoD(d.ctx, dst, src), "copying %d bytes to %#x", len(src), uint64(dst))
}

// CopyFromDevice copies len(dst) bytes from src into dst.
func (d *Device) CopyFromDevice(ctx context.Context, dst []byte, src backend.DevicePtr) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	return d.Wrap(d.v.CopyDtoH(d.ctx, dst, src), "copying %d bytes from %#x", len(dst), uint64(src))
}

// Memset sets n bytes at dst to v and returns once they are set.
func (d *Device) Memset(ctx context.Context, dst backend.DevicePtr, v byte, n int) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	if n < 0 {
		return d.Errorf(backend.CodeInvalidArgument, "memset of %d bytes", n)
	}
	return d.Wrap(d.v.Memset(d.ctx, dst, v, n), "setting %d bytes at %#x", n, uint64(dst))
}

// NewStream creates a non-blocking stream: it never waits for the legacy
// default stream, so other libraries' work cannot stall it.
func (d *Device) NewStream(ctx context.Context) (backend.Stream, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	h, err := d.v.StreamCreate(d.ctx)
	if err != nil {
		return nil, d.Wrap(err, "creating a stream")
	}
	s := &Stream{d: d, h: h, params: new([inlineParams / 8]uint64)}
	if err := d.track(s); err != nil {
		return nil, err
	}
	return s, nil
}

// ImportStream wraps the caller's runtime stream h (0: the default
// stream) without taking it over (backend.NativeStreams).
func (d *Device) ImportStream(h uintptr) (backend.Stream, error) {
	if err := d.usable(context.Background()); err != nil {
		return nil, err
	}
	s := &Stream{d: d, h: Handle(h), borrowed: true, params: new([inlineParams / 8]uint64)}
	if err := d.track(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NativeStream returns the runtime handle of a stream of d.
func (d *Device) NativeStream(s backend.Stream) (uintptr, bool) {
	gs, ok := s.(*Stream)
	if !ok || gs.d != d {
		return 0, false
	}
	return uintptr(gs.h), true
}

// NewEvent creates an event; without timing it is cheaper to record and
// wait on.
func (d *Device) NewEvent(ctx context.Context, timing bool) (backend.Event, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	h, err := d.v.EventCreate(d.ctx, timing)
	if err != nil {
		return nil, d.Wrap(err, "creating an event")
	}
	e := &event{d: d, h: h, timing: timing}
	if err := d.track(e); err != nil {
		return nil, err
	}
	return e, nil
}

// LoadModule loads src.Image or, when there is no image, the built-in
// module kernels.ModuleName that the vendor embeds.
func (d *Device) LoadModule(ctx context.Context, src backend.ModuleSource) (backend.Module, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	image, name := src.Image, src.Name
	builtin := false
	if len(image) == 0 {
		switch name {
		case "":
			return nil, backend.Errorf(backend.CodeInvalidArgument, "%s: module source has neither a name nor an image", d.v.Name())
		case kernels.ModuleName:
			img, err := d.v.BuiltinImage()
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil, backend.Wrap(backend.CodeNotFound, err, fmt.Sprintf("%s: device %d: the %s image", d.v.Name(), d.index, name))
			case err != nil:
				return nil, d.Wrap(err, "the %s image", name)
			case len(img) == 0:
				return nil, d.Errorf(backend.CodeNotFound, "the %s image is empty (build the kernels)", name)
			}
			image, builtin = img, true
		default:
			return nil, backend.Errorf(backend.CodeNotFound, "%s: no built-in module %q (have %q)", d.v.Name(), name, kernels.ModuleName)
		}
	}
	if name == "" {
		name = fmt.Sprintf("image(%d bytes)", len(image))
	}
	load := func() (Handle, error) {
		h, err := d.v.ModuleLoad(d.ctx, image)
		if err != nil {
			if builtin {
				if e := d.v.ExplainLoad(d, image, err); e != nil {
					return 0, e
				}
			}
			return 0, d.Wrap(err, "loading module %s", name)
		}
		return h, nil
	}
	m := &module{d: d, name: name}
	if builtin {
		// Loaded once per device and process: the image is megabytes,
		// and loading it is most of a rendezvous (docs/NCCL.md).
		b, err := d.c.builtin(d, load)
		if err != nil {
			return nil, err
		}
		m.h, m.builtin = b.h, b
	} else {
		h, err := load()
		if err != nil {
			return nil, err
		}
		m.h = h
	}
	if err := d.track(m); err != nil {
		if m.builtin != nil {
			_ = d.c.dropBuiltin(d, m.builtin)
		} else {
			_ = d.v.ModuleUnload(d.ctx, m.h)
		}
		return nil, err
	}
	return m, nil
}

// Close releases the device handle. Streams, events, graphs, modules and
// allocations still open are released first (streams drain) and reported
// in the error.
func (d *Device) Close() error {
	left, summary, first := d.res.Close()
	if !first {
		return nil
	}
	d.c.countOpen(d.index, -1)
	err := d.v.CloseDevice(d)
	d.c.log.Debug(d.v.Name()+": device closed", "device", d.index, "leftovers", left)
	if left > 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "%s: device %d closed with %s still open (released them)",
			d.v.Name(), d.index, summary)
	}
	return err
}

var (
	_ backend.Device        = (*Device)(nil)
	_ backend.NativeStreams = (*Device)(nil)
)
