package gpu

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intranode/intranode/backend"
)

// Waiting on the device polls the runtime: it spins for spinFor (the usual
// case for short collectives, where a sleep would cost more than the work),
// then yields, then sleeps with a growing interval up to maxSleep, checking
// the context between polls so a hung peer ends in ErrTimeout, never a hang.
const (
	spinFor  = 50 * time.Microsecond
	yieldFor = time.Millisecond
	minSleep = 10 * time.Microsecond
	maxSleep = time.Millisecond
)

// poll calls query until it reports done or fails, or ctx ends.
func poll(ctx context.Context, query func() (bool, error)) error {
	start := time.Now()
	sleep := minSleep
	for {
		done, err := query()
		if err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return backend.Errorf(backend.CodeTimeout, "%w", err)
		}
		switch elapsed := time.Since(start); {
		case elapsed < spinFor:
		case elapsed < yieldFor:
			runtime.Gosched()
		default:
			time.Sleep(sleep)
			sleep = min(2*sleep, maxSleep)
		}
	}
}

// Stream is a non-blocking stream of one device.
type Stream struct {
	d         *Device
	h         Handle
	closed    atomic.Bool
	capturing atomic.Bool
	borrowed  bool // imported (ImportStream): the caller owns the runtime stream

	// params is the parameter buffer Launch packs arguments into, kept
	// with the stream so that a launch allocates nothing. Words, not bytes,
	// so it is 8-byte aligned like the kernel arguments it is copied into;
	// an allocation of its own, holding no Go pointers, so that cgo may
	// be handed its address.
	paramsMu sync.Mutex
	params   *[inlineParams / 8]uint64
}

func (s *Stream) resourceKind() string { return "stream" }

// Device is the device the stream belongs to.
func (s *Stream) Device() *Device { return s.d }

// Handle is the runtime's stream.
func (s *Stream) Handle() Handle { return s.h }

// Capturing reports whether the stream is recording into a graph.
func (s *Stream) Capturing() bool { return s.capturing.Load() }

// Usable fails once the stream is closed.
func (s *Stream) Usable() error {
	if s.closed.Load() {
		return s.d.Errorf(backend.CodeClosed, "stream is closed")
	}
	return nil
}

// Launch enqueues fn. Arguments are packed as backend.MarshalArgs lays
// them out into the stream's parameter buffer and handed to the runtime
// as one buffer, which it copies before returning.
func (s *Stream) Launch(fn backend.Function, cfg backend.LaunchConfig, args ...backend.Arg) error {
	if err := s.Usable(); err != nil {
		return err
	}
	f, ok := fn.(*function)
	if !ok || f.m.d.ctx != s.d.ctx || f.m.d.c != s.d.c {
		return s.d.Errorf(backend.CodeInvalidArgument, "%T is not a function loaded on this device", fn)
	}
	if f.m.closed.Load() {
		return s.d.Errorf(backend.CodeClosed, "module of %s is unloaded", f.name)
	}
	size, err := paramSize(args)
	if err != nil {
		return s.d.Wrap(err, "launching %s", f.name)
	}
	cfg.Early = cfg.Early && s.d.early
	s.paramsMu.Lock()
	defer s.paramsMu.Unlock()
	words := s.params[:]
	if size > inlineParams {
		words = make([]uint64, size/8)
	}
	buf := wordBytes(words)[:size]
	packParams(buf, args)
	if err := s.d.v.Launch(s.d.ctx, f.h, cfg, s.h, buf); err != nil {
		return s.d.Wrap(err, "launching %s (grid %v, block %v, %d shared bytes)", f.name, cfg.Grid, cfg.Block, cfg.SharedMem)
	}
	return nil
}

// CopyAsync enqueues a device-to-device copy.
func (s *Stream) CopyAsync(dst, src backend.DevicePtr, n int) error {
	if err := s.Usable(); err != nil {
		return err
	}
	if n < 0 {
		return s.d.Errorf(backend.CodeInvalidArgument, "copy of %d bytes", n)
	}
	if n == 0 {
		return nil
	}
	return s.d.Wrap(s.d.v.CopyDtoDAsync(s.d.ctx, dst, src, n, s.h), "enqueueing a copy of %d bytes", n)
}

// event returns ev as an event of this stream's device.
func (s *Stream) event(ev backend.Event) (*event, error) {
	e, ok := ev.(*event)
	if !ok || e.d.c != s.d.c {
		return nil, s.d.Errorf(backend.CodeInvalidArgument, "%T is not a %s event", ev, s.d.v.Name())
	}
	return e, nil
}

// Record enqueues ev.
func (s *Stream) Record(ev backend.Event) error {
	return s.withEvent(ev, "recording an event", func(e *event) error { return s.d.v.EventRecord(s.d.ctx, e.h, s.h) })
}

// WaitEvent makes later work on s wait for ev.
func (s *Stream) WaitEvent(ev backend.Event) error {
	return s.withEvent(ev, "waiting for an event", func(e *event) error { return s.d.v.StreamWaitEvent(s.d.ctx, s.h, e.h) })
}

// withEvent runs call with ev, an event of this device, on a usable
// stream, and wraps its error as what.
func (s *Stream) withEvent(ev backend.Event, what string, call func(*event) error) error {
	if err := s.Usable(); err != nil {
		return err
	}
	e, err := s.event(ev)
	if err != nil {
		return err
	}
	return s.d.Wrap(call(e), "%s", what)
}

// Synchronize waits for the stream's work. With a context that can end it
// polls the runtime and returns ErrTimeout wrapping ctx.Err() when ctx
// ends first; with one that cannot it blocks in the runtime's own
// synchronize.
func (s *Stream) Synchronize(ctx context.Context) error {
	if err := s.Usable(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return s.d.Wrap(s.d.v.StreamSynchronize(s.d.ctx, s.h), "synchronizing a stream")
	}
	err := poll(ctx, func() (bool, error) { return s.d.v.StreamQuery(s.d.ctx, s.h) })
	if backend.CodeOf(err) == backend.CodeTimeout {
		return s.d.Errorf(backend.CodeTimeout, "stream still busy: %w", err)
	}
	return s.d.Wrap(err, "synchronizing a stream")
}

// BeginCapture starts recording the stream's work into a graph, in relaxed
// mode (see Runtime.BeginCapture). The cost is that the runtime no longer
// rejects "unsafe" calls (synchronous copies, allocations) made while a
// capture is open; don't make them on this device until EndCapture.
func (s *Stream) BeginCapture() error {
	if err := s.Usable(); err != nil {
		return err
	}
	if !s.capturing.CompareAndSwap(false, true) {
		return s.d.Errorf(backend.CodeInvalidArgument, "stream is already capturing")
	}
	if err := s.d.v.BeginCapture(s.d.ctx, s.h); err != nil {
		s.capturing.Store(false)
		return s.d.Wrap(err, "beginning a capture")
	}
	return nil
}

// EndCapture stops recording and instantiates the graph.
func (s *Stream) EndCapture() (backend.Graph, error) {
	if err := s.Usable(); err != nil {
		return nil, err
	}
	if !s.capturing.CompareAndSwap(true, false) {
		return nil, s.d.Errorf(backend.CodeInvalidArgument, "stream is not capturing")
	}
	g, e, err := s.d.v.EndCapture(s.d.ctx, s.h)
	if err != nil {
		return nil, s.d.Wrap(err, "ending a capture")
	}
	gr := &graph{d: s.d, g: g, e: e}
	if err := s.d.track(gr); err != nil {
		return nil, err
	}
	return gr, nil
}

// Close ends an open capture, drains the stream and destroys it.
func (s *Stream) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.d.res.Remove(s)
	if s.borrowed {
		return nil
	}
	v, c := s.d.v, s.d.ctx
	var errs []error
	if s.capturing.Load() {
		if g, e, err := v.EndCapture(c, s.h); err == nil {
			_ = v.GraphDestroy(c, g, e)
		}
	}
	if err := v.StreamSynchronize(c, s.h); err != nil {
		errs = append(errs, s.d.Wrap(err, "draining a stream"))
	}
	if err := v.StreamDestroy(c, s.h); err != nil {
		errs = append(errs, s.d.Wrap(err, "destroying a stream"))
	}
	return errors.Join(errs...)
}

// event is an event of one device.
type event struct {
	d      *Device
	h      Handle
	timing bool
	closed atomic.Bool
}

func (e *event) resourceKind() string { return "event" }

func (e *event) usable() error {
	if e.closed.Load() {
		return e.d.Errorf(backend.CodeClosed, "event is closed")
	}
	return nil
}

// Synchronize waits until the event has completed or ctx ends (ErrTimeout
// wrapping ctx.Err()); like Stream.Synchronize it blocks in the runtime
// when ctx cannot end.
func (e *event) Synchronize(ctx context.Context) error {
	if err := e.usable(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return e.d.Wrap(e.d.v.EventSynchronize(e.d.ctx, e.h), "synchronizing an event")
	}
	err := poll(ctx, func() (bool, error) { return e.d.v.EventQuery(e.d.ctx, e.h) })
	if backend.CodeOf(err) == backend.CodeTimeout {
		return e.d.Errorf(backend.CodeTimeout, "event not reached: %w", err)
	}
	return e.d.Wrap(err, "synchronizing an event")
}

// Done reports whether the event has completed.
func (e *event) Done() (bool, error) {
	if err := e.usable(); err != nil {
		return false, err
	}
	done, err := e.d.v.EventQuery(e.d.ctx, e.h)
	if err != nil {
		return false, e.d.Wrap(err, "querying an event")
	}
	return done, nil
}

// Elapsed is the device time from start to e.
func (e *event) Elapsed(start backend.Event) (time.Duration, error) {
	if err := e.usable(); err != nil {
		return 0, err
	}
	s, ok := start.(*event)
	if !ok || s.d.c != e.d.c {
		return 0, e.d.Errorf(backend.CodeInvalidArgument, "%T is not a %s event", start, e.d.v.Name())
	}
	if !e.timing || !s.timing {
		return 0, e.d.Errorf(backend.CodeInvalidArgument, "elapsed time needs two timing events")
	}
	ms, err := e.d.v.EventElapsed(e.d.ctx, s.h, e.h)
	if err != nil {
		return 0, e.d.Wrap(err, "elapsed time")
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event.
func (e *event) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	e.d.res.Remove(e)
	return e.d.Wrap(e.d.v.EventDestroy(e.d.ctx, e.h), "destroying an event")
}

// graph is an instantiated graph.
type graph struct {
	d      *Device
	g      Handle
	e      Handle
	closed atomic.Bool
}

func (g *graph) resourceKind() string { return "graph" }

// Launch enqueues one replay on s.
func (g *graph) Launch(s backend.Stream) error {
	if g.closed.Load() {
		return g.d.Errorf(backend.CodeClosed, "graph is closed")
	}
	st, ok := s.(*Stream)
	if !ok || st.d.ctx != g.d.ctx || st.d.c != g.d.c {
		return g.d.Errorf(backend.CodeInvalidArgument, "%T is not a stream of this device", s)
	}
	if err := st.Usable(); err != nil {
		return err
	}
	return g.d.Wrap(g.d.v.GraphLaunch(g.d.ctx, g.e, st.h), "launching a graph")
}

// Close destroys the graph.
func (g *graph) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	g.d.res.Remove(g)
	return g.d.Wrap(g.d.v.GraphDestroy(g.d.ctx, g.g, g.e), "destroying a graph")
}

var (
	_ backend.Stream = (*Stream)(nil)
	_ backend.Event  = (*event)(nil)
	_ backend.Graph  = (*graph)(nil)
)
