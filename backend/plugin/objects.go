//go:build linux

package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/spans"
)

// The host-side objects. Each is an id of the object in the plugin plus
// what never changes (a pointer, a size, a name), cached so that the
// methods without a context do not cross the process boundary.

// device is a device handle opened in the plugin.
type device struct {
	c    *conn
	id   uint64
	info backend.DeviceInfo
	gran int

	mu     sync.Mutex
	closed bool
	views  map[*hostAllocation]struct{} // host allocations still mapped
	// own are the ranges of the live allocations made through this
	// handle, for CheckRange without a call to the plugin.
	own spans.Table
}

var _ backend.Device = (*device)(nil)

// Index is the device's index on the host.
func (d *device) Index() int { return d.info.Index }

// Info describes the device, as the plugin reported it when it was opened.
func (d *device) Info() backend.DeviceInfo { return d.info }

// Granularity is the device's, as reported when it was opened.
func (d *device) Granularity() int { return d.gran }

func (d *device) newAlloc(r *allocReply) *allocation {
	d.own.Add(r.Ptr, r.Size)
	return &allocation{c: d.c, dev: d, id: r.ID, ptr: r.Ptr, size: r.Size}
}

// CheckRange fails with backend.ErrInvalidArgument when [p, p+n) starts
// inside an allocation made through this handle and runs past its end
// (backend.RangeChecker). It asks the plugin nothing, which would cost a
// round trip per collective call: memory this handle did not make gets
// no verdict.
func (d *device) CheckRange(p backend.DevicePtr, n int) error {
	if n <= 0 {
		return nil
	}
	_, err := d.own.Check(p, n)
	if err != nil {
		return fmt.Errorf("plugin: device %d: %w", d.info.Index, err)
	}
	return nil
}

// Alloc allocates plain device memory in the plugin.
func (d *device) Alloc(ctx context.Context, size int) (backend.Allocation, error) {
	r, err := callBounded[allocReq, allocReply](ctx, d.c, mAlloc, &allocReq{Dev: d.id, Size: size})
	if err != nil {
		return nil, err
	}
	return d.newAlloc(r), nil
}

// AllocShareable allocates shareable memory in the plugin.
func (d *device) AllocShareable(ctx context.Context, size int, kind backend.HandleKind) (backend.Allocation, error) {
	r, err := callBounded[allocReq, allocReply](ctx, d.c, mAllocShareable, &allocReq{Dev: d.id, Size: size, Kind: kind})
	if err != nil {
		return nil, err
	}
	return d.newAlloc(r), nil
}

// Import maps a handle in the plugin. A descriptor handle's file is passed
// to the plugin on the descriptor socket (it stays the caller's).
func (d *device) Import(ctx context.Context, h backend.Handle) (backend.Allocation, error) {
	ctx, cancel := d.c.bound(ctx)
	defer cancel()
	req := &importReq{Dev: d.id, Kind: h.Kind, Opaque: h.Opaque, Size: h.Size}
	if h.Kind == backend.HandleFD {
		if h.File == nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: fd handle without a file")
		}
		token, err := d.c.fds.send(ctx, h.File)
		if err != nil {
			return nil, err
		}
		req.Token = token
	}
	r, err := call[importReq, allocReply](ctx, d.c, mImport, req)
	if err != nil {
		return nil, err
	}
	return d.newAlloc(r), nil
}

// AllocHost allocates host memory in the plugin and maps it here too, so
// that Bytes and the plugin's kernels see the same pages.
func (d *device) AllocHost(ctx context.Context, size int) (backend.HostAllocation, error) {
	ctx, cancel := d.c.bound(ctx)
	defer cancel()
	r, err := call[allocReq, allocReply](ctx, d.c, mAllocHost, &allocReq{Dev: d.id, Size: size})
	if err != nil {
		return nil, err
	}
	a := d.newAlloc(r)
	f, err := d.c.fds.take(ctx, r.Token)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	defer f.Close()
	view, err := mapShared(f, r.MapSize)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	h := &hostAllocation{allocation: a, dev: d, view: view}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = h.release()
		return nil, backend.Errorf(backend.CodeClosed, "plugin: device %d handle is closed", d.info.Index)
	}
	d.views[h] = struct{}{}
	return h, nil
}

// CopyToDevice copies src in messages of at most copyChunk bytes.
func (d *device) CopyToDevice(ctx context.Context, dst backend.DevicePtr, src []byte) error {
	ctx, cancel := d.c.bound(ctx)
	defer cancel()
	for off := 0; ; off += copyChunk {
		end := min(off+copyChunk, len(src))
		if _, err := call[copyToReq, empty](ctx, d.c, mCopyToDevice, &copyToReq{Dev: d.id, Dst: dst.Add(off), Data: src[off:end]}); err != nil {
			return err
		}
		if end == len(src) {
			return nil
		}
	}
}

// CopyFromDevice copies into dst in messages of at most copyChunk bytes.
func (d *device) CopyFromDevice(ctx context.Context, dst []byte, src backend.DevicePtr) error {
	ctx, cancel := d.c.bound(ctx)
	defer cancel()
	for off := 0; ; off += copyChunk {
		end := min(off+copyChunk, len(dst))
		r, err := call[copyFromReq, copyFromReply](ctx, d.c, mCopyFromDevice, &copyFromReq{Dev: d.id, Src: src.Add(off), N: end - off})
		if err != nil {
			return err
		}
		if len(r.Data) != end-off {
			return backend.Errorf(backend.CodeInternal, "plugin: copy from device returned %d bytes, want %d", len(r.Data), end-off)
		}
		copy(dst[off:end], r.Data)
		if end == len(dst) {
			return nil
		}
	}
}

// Memset runs in the plugin.
func (d *device) Memset(ctx context.Context, dst backend.DevicePtr, v byte, n int) error {
	_, err := callBounded[memsetReq, empty](ctx, d.c, mMemset, &memsetReq{Dev: d.id, Dst: dst, V: v, N: n})
	return err
}

// NewStream creates a stream in the plugin.
func (d *device) NewStream(ctx context.Context) (backend.Stream, error) {
	r, err := callBounded[ref, ref](ctx, d.c, mNewStream, &ref{ID: d.id})
	if err != nil {
		return nil, err
	}
	return &stream{remote{c: d.c, id: r.ID}}, nil
}

// NewEvent creates an event in the plugin.
func (d *device) NewEvent(ctx context.Context, timing bool) (backend.Event, error) {
	r, err := callBounded[eventReq, ref](ctx, d.c, mNewEvent, &eventReq{Dev: d.id, Timing: timing})
	if err != nil {
		return nil, err
	}
	return &event{remote{c: d.c, id: r.ID}}, nil
}

// LoadModule loads a module in the plugin: built-in modules by name, or an
// image that travels to the plugin.
func (d *device) LoadModule(ctx context.Context, src backend.ModuleSource) (backend.Module, error) {
	r, err := callBounded[moduleReq, ref](ctx, d.c, mLoadModule, &moduleReq{Dev: d.id, Name: src.Name, Image: src.Image})
	if err != nil {
		return nil, err
	}
	return &module{remote{c: d.c, id: r.ID}}, nil
}

// Close closes the handle in the plugin (which reports what was left open)
// and unmaps the host views of host allocations left open.
func (d *device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	views := d.views
	d.views = nil
	d.mu.Unlock()
	var errs []error
	for h := range views {
		h.once.Do(func() { errs = append(errs, h.unmap()) })
	}
	err := closeCall(d.c, mCloseDevice, d.id)
	return errors.Join(append(errs, err)...)
}

func (d *device) forget(h *hostAllocation) {
	d.mu.Lock()
	delete(d.views, h)
	d.mu.Unlock()
}

// closeCall closes object id in the plugin. Once the backend is closed the
// plugin and its objects are gone, so there is nothing left to close.
func closeCall(c *conn, method string, id uint64) error {
	if c.closed.Load() {
		return nil
	}
	_, err := callNow[ref, empty](c, method, &ref{ID: id})
	if backend.CodeOf(err) == backend.CodeClosed && c.closed.Load() {
		return nil
	}
	return err
}

// callNow is call for a method that takes no context: bounded by the call
// timeout.
func callNow[Req, Resp any](c *conn, method string, req *Req) (*Resp, error) {
	return callBounded[Req, Resp](context.Background(), c, method, req)
}

// remote is an object in the plugin: its connection and id, closed once.
type remote struct {
	c    *conn
	id   uint64
	once sync.Once
	err  error
}

// closeOnce closes the object in the plugin with method; later calls
// return the first's error.
func (r *remote) closeOnce(method string) error {
	r.once.Do(func() { r.err = closeCall(r.c, method, r.id) })
	return r.err
}

// allocation is memory in the plugin.
type allocation struct {
	c    *conn
	dev  *device // the handle that made it
	id   uint64
	ptr  backend.DevicePtr
	size int

	once sync.Once
	err  error
}

var _ backend.Allocation = (*allocation)(nil)

// Ptr is the plugin's address of the memory.
func (a *allocation) Ptr() backend.DevicePtr { return a.ptr }

// Size is the usable size.
func (a *allocation) Size() int { return a.size }

// Export exports the allocation in the plugin; a descriptor comes back on
// the descriptor socket and is the caller's to close.
func (a *allocation) Export(kind backend.HandleKind) (backend.Handle, error) {
	// One bound for the call and the descriptor's arrival: Export takes no
	// context.
	ctx, cancel := a.c.bound(context.Background())
	defer cancel()
	r, err := call[exportReq, exportReply](ctx, a.c, mExport, &exportReq{ID: a.id, Kind: kind})
	if err != nil {
		return backend.Handle{}, err
	}
	h := backend.Handle{Kind: r.Kind, Opaque: r.Opaque, Size: r.Size}
	if r.Token != 0 {
		if h.File, err = a.c.fds.take(ctx, r.Token); err != nil {
			return backend.Handle{}, err
		}
	}
	return h, nil
}

// Close frees (or unmaps) the memory in the plugin; closing twice is a
// no-op.
func (a *allocation) Close() error {
	a.once.Do(func() {
		a.dev.own.Remove(a.ptr)
		a.err = closeCall(a.c, mFree, a.id)
	})
	return a.err
}

// hostAllocation is host memory of the plugin mapped into this process.
type hostAllocation struct {
	*allocation
	dev  *device
	view []byte

	once sync.Once
	err  error
}

var _ backend.HostAllocation = (*hostAllocation)(nil)

// Bytes is this process's view of the memory; it is valid until Close.
func (h *hostAllocation) Bytes() []byte { return h.view[:h.size:h.size] }

// Close frees the memory in the plugin and unmaps the view.
func (h *hostAllocation) Close() error {
	h.once.Do(func() {
		h.dev.forget(h)
		h.err = h.release()
	})
	return h.err
}

func (h *hostAllocation) release() error {
	return errors.Join(h.allocation.Close(), h.unmap())
}

func (h *hostAllocation) unmap() error { return unmapShared(h.view) }

// stream is a stream in the plugin.
type stream struct{ remote }

var _ backend.Stream = (*stream)(nil)

// Launch enqueues fn, a function of a module loaded through this backend.
func (s *stream) Launch(fn backend.Function, cfg backend.LaunchConfig, args ...backend.Arg) error {
	f, ok := fn.(*function)
	if !ok || f == nil || f.c != s.c {
		return backend.Errorf(backend.CodeInvalidArgument, "plugin: launch of a %T that this plugin did not load", fn)
	}
	wire := make([]wireArg, len(args))
	for i, a := range args {
		wire[i] = wireArg{Size: a.Size(), Bits: a.U64()}
	}
	_, err := callNow[launchReq, empty](s.c, mLaunch, &launchReq{Stream: s.id, Func: f.id, Grid: cfg.Grid, Block: cfg.Block,
		SharedMem: cfg.SharedMem, Early: cfg.Early, Args: wire})
	return err
}

// CopyAsync enqueues a device-to-device copy.
func (s *stream) CopyAsync(dst, src backend.DevicePtr, n int) error {
	_, err := callNow[copyAsyncReq, empty](s.c, mCopyAsync, &copyAsyncReq{Stream: s.id, Dst: dst, Src: src, N: n})
	return err
}

// withEvent calls method m with this stream and ev, an event of the same
// plugin.
func (s *stream) withEvent(m string, ev backend.Event) error {
	e, ok := ev.(*event)
	if !ok || e == nil || e.c != s.c {
		return backend.Errorf(backend.CodeInvalidArgument, "plugin: %T is not an event of this plugin", ev)
	}
	_, err := callNow[streamEventReq, empty](s.c, m, &streamEventReq{Stream: s.id, Event: e.id})
	return err
}

// Record enqueues ev.
func (s *stream) Record(ev backend.Event) error { return s.withEvent(mRecord, ev) }

// WaitEvent makes later work wait for ev.
func (s *stream) WaitEvent(ev backend.Event) error { return s.withEvent(mWaitEvent, ev) }

// Synchronize waits in the plugin until the queued work is done or ctx
// ends; a plugin that dies meanwhile makes it fail at once.
func (s *stream) Synchronize(ctx context.Context) error {
	_, err := call[ref, empty](ctx, s.c, mSynchronize, &ref{ID: s.id})
	return err
}

// BeginCapture starts capturing in the plugin.
func (s *stream) BeginCapture() error {
	_, err := callNow[ref, empty](s.c, mBeginCapture, &ref{ID: s.id})
	return err
}

// EndCapture returns the captured graph.
func (s *stream) EndCapture() (backend.Graph, error) {
	r, err := callNow[ref, ref](s.c, mEndCapture, &ref{ID: s.id})
	if err != nil {
		return nil, err
	}
	return &graph{remote{c: s.c, id: r.ID}}, nil
}

// Close drains and releases the stream in the plugin.
func (s *stream) Close() error { return s.closeOnce(mCloseStream) }

// event is an event in the plugin.
type event struct{ remote }

var _ backend.Event = (*event)(nil)

// Synchronize waits in the plugin until the event completes or ctx ends.
func (e *event) Synchronize(ctx context.Context) error {
	_, err := call[ref, empty](ctx, e.c, mEventSynchronize, &ref{ID: e.id})
	return err
}

// Done asks the plugin whether the event completed.
func (e *event) Done() (bool, error) {
	r, err := callNow[ref, answer](e.c, mEventDone, &ref{ID: e.id})
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

// Elapsed is measured in the plugin.
func (e *event) Elapsed(start backend.Event) (time.Duration, error) {
	s, ok := start.(*event)
	if !ok || s == nil || s.c != e.c {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: elapsed from a %T that is not an event of this plugin", start)
	}
	r, err := callNow[elapsedReq, elapsedReply](e.c, mElapsed, &elapsedReq{Event: e.id, Start: s.id})
	if err != nil {
		return 0, err
	}
	return time.Duration(r.Nanos), nil
}

// Close releases the event in the plugin.
func (e *event) Close() error { return e.closeOnce(mCloseEvent) }

// graph is a captured graph in the plugin.
type graph struct{ remote }

var _ backend.Graph = (*graph)(nil)

// Launch enqueues one replay on s, a stream of this plugin.
func (g *graph) Launch(s backend.Stream) error {
	st, ok := s.(*stream)
	if !ok || st == nil || st.c != g.c {
		return backend.Errorf(backend.CodeInvalidArgument, "plugin: graph launch on a %T that is not a stream of this plugin", s)
	}
	_, err := callNow[graphLaunchReq, empty](g.c, mLaunchGraph, &graphLaunchReq{Graph: g.id, Stream: st.id})
	return err
}

// Close releases the graph in the plugin.
func (g *graph) Close() error { return g.closeOnce(mCloseGraph) }

// module is a module loaded in the plugin.
type module struct{ remote }

var _ backend.Module = (*module)(nil)

// Function looks a kernel up in the plugin.
func (m *module) Function(name string) (backend.Function, error) {
	r, err := callNow[functionReq, ref](m.c, mFunction, &functionReq{Module: m.id, Name: name})
	if err != nil {
		return nil, err
	}
	return &function{c: m.c, id: r.ID, name: name}, nil
}

// Close unloads the module in the plugin.
func (m *module) Close() error { return m.closeOnce(mCloseModule) }

// function is a kernel of a module loaded in the plugin.
type function struct {
	c    *conn
	id   uint64
	name string
}

var _ backend.Function = (*function)(nil)

// Name is the kernel name.
func (f *function) Name() string { return f.name }
