package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
)

// device is one handle on a fake device. It tracks what was created through
// it so that Close can report (and release) what was left open.
type device struct {
	b   *Backend
	st  *deviceState
	log *slog.Logger

	mu      sync.Mutex
	closed  bool
	allocs  map[*allocation]struct{}
	streams map[*stream]struct{}
	modules map[*module]struct{}
}

var _ backend.Device = (*device)(nil)

func newDevice(b *Backend, st *deviceState) *device {
	return &device{
		b:       b,
		st:      st,
		log:     b.log,
		allocs:  map[*allocation]struct{}{},
		streams: map[*stream]struct{}{},
		modules: map[*module]struct{}{},
	}
}

// usable fails when the handle is closed or ctx has ended.
func (d *device) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return backend.Wrap(backend.CodeTimeout, err, fmt.Sprintf("fake: device %d", d.st.index))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return backend.Errorf(backend.CodeClosed, "fake: device %d handle is closed", d.st.index)
	}
	return nil
}

// track registers an object created through this handle.
func (d *device) track(obj any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return backend.Errorf(backend.CodeClosed, "fake: device %d handle is closed", d.st.index)
	}
	switch o := obj.(type) {
	case *allocation:
		d.allocs[o] = struct{}{}
	case *stream:
		d.streams[o] = struct{}{}
	case *module:
		d.modules[o] = struct{}{}
	}
	return nil
}

// forget removes a closed object.
func (d *device) forget(obj any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch o := obj.(type) {
	case *allocation:
		delete(d.allocs, o)
	case *stream:
		delete(d.streams, o)
	case *module:
		delete(d.modules, o)
	}
}

// CheckRange reports whether [p, p+n) lies inside one live allocation of
// the process (backend.RangeChecker).
func (d *device) CheckRange(p backend.DevicePtr, n int) error {
	_, err := addresses.find(p, n, false)
	return err
}

// Index is the device index.
func (d *device) Index() int { return d.st.index }

// Info describes the device.
func (d *device) Info() backend.DeviceInfo { return d.st.info }

// Granularity is the OS page size: shareable allocations are memfd pages,
// so nothing coarser is needed and small allocations waste little.
func (d *device) Granularity() int { return os.Getpagesize() }

// Alloc returns private anonymous memory.
func (d *device) Alloc(ctx context.Context, size int) (backend.Allocation, error) {
	return asAllocation(d.newAlloc(ctx, allocPlain, size, 0))
}

// AllocShareable returns memfd-backed memory exportable as kind.
func (d *device) AllocShareable(ctx context.Context, size int, kind backend.HandleKind) (backend.Allocation, error) {
	switch kind {
	case backend.HandleFD:
	case backend.HandleFabric:
		if !d.b.cfg.fabric {
			return nil, backend.Errorf(backend.CodeNotSupported, "fake: fabric handles are off (WithFabric)")
		}
	default:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: shareable allocation for handle kind %s", kind)
	}
	return asAllocation(d.newAlloc(ctx, allocShareable, size, kind))
}

// asAllocation returns a failed allocation as a nil interface, not as an
// interface holding a nil *allocation (which is not == nil, and whose
// Close would dereference it).
func asAllocation(a *allocation, err error) (backend.Allocation, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Import maps an exported allocation.
func (d *device) Import(ctx context.Context, h backend.Handle) (backend.Allocation, error) {
	return asAllocation(d.importHandle(ctx, h))
}

// AllocHost returns shared anonymous memory with a host view; it does not
// count against the device's memory limit.
func (d *device) AllocHost(ctx context.Context, size int) (backend.HostAllocation, error) {
	a, err := d.newAlloc(ctx, allocHost, size, 0)
	if err != nil {
		return nil, err
	}
	return hostAllocation{a}, nil
}

// access resolves [p, p+n) pinned and runs fn on it.
func (d *device) access(ctx context.Context, what string, p backend.DevicePtr, n int, fn func([]byte)) error {
	if err := d.usable(ctx); err != nil {
		return err
	}
	l := addresses.Lease()
	defer l.Release()
	b, err := l.Bytes(p, n)
	if err != nil {
		return fmt.Errorf("fake: device %d: %s: %w", d.st.index, what, err)
	}
	fn(b)
	return nil
}

// CopyToDevice copies src to dst.
func (d *device) CopyToDevice(ctx context.Context, dst backend.DevicePtr, src []byte) error {
	return d.access(ctx, "copy to device", dst, len(src), func(b []byte) { copy(b, src) })
}

// CopyFromDevice copies from src into dst.
func (d *device) CopyFromDevice(ctx context.Context, dst []byte, src backend.DevicePtr) error {
	return d.access(ctx, "copy from device", src, len(dst), func(b []byte) { copy(dst, b) })
}

// Memset sets n bytes at dst to v.
func (d *device) Memset(ctx context.Context, dst backend.DevicePtr, v byte, n int) error {
	return d.access(ctx, "memset", dst, n, func(b []byte) {
		if len(b) > 0 {
			b[0] = v
			numeric.Repeat(b, 1)
		}
	})
}

// NewStream starts a stream goroutine.
func (d *device) NewStream(ctx context.Context) (backend.Stream, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	s := newStream(d)
	if err := d.track(s); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// NewEvent creates an event.
func (d *device) NewEvent(ctx context.Context, timing bool) (backend.Event, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	return &event{st: d.st, timing: timing}, nil
}

// LoadModule looks a module up in the registry (RegisterModule).
func (d *device) LoadModule(ctx context.Context, src backend.ModuleSource) (backend.Module, error) {
	if err := d.usable(ctx); err != nil {
		return nil, err
	}
	if len(src.Image) > 0 {
		return nil, backend.Errorf(backend.CodeNotSupported,
			"fake: cannot load a %d-byte module image: the fake runs Go kernels registered with fake.RegisterModule", len(src.Image))
	}
	if src.Name == "" {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: module source has neither a name nor an image")
	}
	kernels, err := lookupModule(src.Name)
	if override := d.b.cfg.kernels[src.Name]; override != nil {
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			return nil, err
		}
		kernels = maps.Clone(kernels)
		if kernels == nil {
			kernels = map[string]Kernel{}
		}
		maps.Copy(kernels, override)
		err = nil
	}
	if err != nil {
		return nil, err
	}
	m := &module{dev: d, name: src.Name, kernels: kernels}
	m.unloaded, m.unload = context.WithCancel(context.Background())
	if err := d.track(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Close closes the handle. Streams (which finish their queued work, kernels
// seeing a cancelled context), modules and allocations still open are closed
// too, and reported in the error.
func (d *device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	streams, modules, allocs := d.streams, d.modules, d.allocs
	d.streams, d.modules, d.allocs = map[*stream]struct{}{}, map[*module]struct{}{}, map[*allocation]struct{}{}
	d.mu.Unlock()

	for s := range streams {
		_ = s.Close()
	}
	for m := range modules {
		_ = m.Close()
	}
	for a := range allocs {
		_ = a.Close()
	}
	d.log.Debug("fake: close", "device", d.st.index)
	var left []string
	if n := len(allocs); n > 0 {
		left = append(left, fmt.Sprintf("%d allocation(s)", n))
	}
	if n := len(streams); n > 0 {
		left = append(left, fmt.Sprintf("%d stream(s)", n))
	}
	if n := len(modules); n > 0 {
		left = append(left, fmt.Sprintf("%d module(s)", n))
	}
	if len(left) > 0 {
		return backend.Errorf(backend.CodeInvalidArgument,
			"fake: device %d closed with %s still open (released them)", d.st.index, strings.Join(left, ", "))
	}
	return nil
}
