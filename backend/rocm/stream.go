//go:build rocm

package rocm

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

// stream is a non-blocking HIP stream of one device.
type stream struct {
	d         *device
	h         hipStream
	closed    atomic.Bool
	capturing atomic.Bool

	// params is the parameter buffer Launch packs arguments into, kept
	// with the stream so that a launch allocates nothing. Words, not bytes,
	// so it is 8-byte aligned like the kernel arguments it is copied into.
	paramsMu sync.Mutex
	params   [inlineParams / 8]uint64
}

func (s *stream) resourceKind() string { return "stream" }

func (s *stream) open() error {
	if s.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "rocm: device %d: stream is closed", s.d.index)
	}
	return nil
}

// Launch enqueues fn. The arguments are packed as backend.MarshalArgs lays
// them out (the AMDGPU kernel-argument layout is the C struct's) and handed
// to hipModuleLaunchKernel with HIP_LAUNCH_PARAM_BUFFER_POINTER, which copies
// them before returning.
func (s *stream) Launch(fn backend.Function, cfg backend.LaunchConfig, args ...backend.Arg) error {
	if err := s.open(); err != nil {
		return err
	}
	f, ok := fn.(*function)
	if !ok || f.m.d.index != s.d.index || f.m.d.b != s.d.b {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: %T is not a function loaded on this device", s.d.index, fn)
	}
	if f.m.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "rocm: device %d: module of %s is unloaded", s.d.index, f.name)
	}
	size, err := paramSize(args)
	if err != nil {
		return err
	}
	s.paramsMu.Lock()
	defer s.paramsMu.Unlock()
	words := s.params[:]
	if size > inlineParams {
		words = make([]uint64, size/8)
	}
	buf := wordBytes(words)[:size]
	packParams(buf, args)
	if err := s.d.hip.Launch(s.d.index, f.h, cfg, s.h, buf); err != nil {
		return wrap(err, "rocm: device %d: launching %s (grid %v, block %v, %d shared bytes)", s.d.index, f.name, cfg.Grid, cfg.Block, cfg.SharedMem)
	}
	return nil
}

// CopyAsync enqueues a device-to-device copy (peer memory included).
func (s *stream) CopyAsync(dst, src backend.DevicePtr, n int) error {
	if err := s.open(); err != nil {
		return err
	}
	if n < 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: copy of %d bytes", s.d.index, n)
	}
	if n == 0 {
		return nil
	}
	return wrap(s.d.hip.CopyDtoDAsync(s.d.index, dst, src, n, s.h), "rocm: device %d: enqueueing a copy of %d bytes", s.d.index, n)
}

// Record enqueues ev.
func (s *stream) Record(ev backend.Event) error {
	if err := s.open(); err != nil {
		return err
	}
	e, ok := ev.(*event)
	if !ok {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: %T is not a HIP event", s.d.index, ev)
	}
	return wrap(s.d.hip.EventRecord(s.d.index, e.h, s.h), "rocm: device %d: recording an event", s.d.index)
}

// WaitEvent makes later work on s wait for ev, which may belong to another
// device.
func (s *stream) WaitEvent(ev backend.Event) error {
	if err := s.open(); err != nil {
		return err
	}
	e, ok := ev.(*event)
	if !ok {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: %T is not a HIP event", s.d.index, ev)
	}
	return wrap(s.d.hip.StreamWaitEvent(s.d.index, s.h, e.h), "rocm: device %d: waiting for an event", s.d.index)
}

// Synchronize waits for the stream's work. With a context that can end it
// polls hipStreamQuery and returns ErrTimeout wrapping ctx.Err() when ctx
// ends first; with one that cannot (context.Background) it blocks in
// hipStreamSynchronize.
func (s *stream) Synchronize(ctx context.Context) error {
	if err := s.open(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return wrap(s.d.hip.StreamSynchronize(s.d.index, s.h), "rocm: device %d: synchronizing a stream", s.d.index)
	}
	err := poll(ctx, func() (bool, error) { return s.d.hip.StreamQuery(s.d.index, s.h) })
	if backend.CodeOf(err) == backend.CodeTimeout {
		return backend.Errorf(backend.CodeTimeout, "rocm: device %d: stream still busy: %w", s.d.index, err)
	}
	return wrap(err, "rocm: device %d: synchronizing a stream", s.d.index)
}

// BeginCapture starts recording the stream's work into a graph.
//
// The capture runs in hipStreamCaptureModeRelaxed. The other two modes tie
// the capture to the OS thread that began it or police every thread, and
// want hipStreamEndCapture on the thread that called hipStreamBeginCapture;
// a goroutine may move between threads in between, and unrelated goroutines
// share threads, so only relaxed mode is sound from Go. The cost is that
// the runtime no longer rejects "unsafe" calls (synchronous copies,
// allocations) made while a capture is open; don't make them on this device
// until EndCapture.
func (s *stream) BeginCapture() error {
	if err := s.open(); err != nil {
		return err
	}
	if !s.capturing.CompareAndSwap(false, true) {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: stream is already capturing", s.d.index)
	}
	if err := s.d.hip.BeginCapture(s.d.index, s.h); err != nil {
		s.capturing.Store(false)
		return wrap(err, "rocm: device %d: beginning a capture", s.d.index)
	}
	return nil
}

// EndCapture stops recording and instantiates the graph.
func (s *stream) EndCapture() (backend.Graph, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if !s.capturing.CompareAndSwap(true, false) {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: stream is not capturing", s.d.index)
	}
	g, e, err := s.d.hip.EndCapture(s.d.index, s.h)
	if err != nil {
		return nil, wrap(err, "rocm: device %d: ending a capture", s.d.index)
	}
	gr := &graph{d: s.d, g: g, e: e}
	if err := s.d.track(gr); err != nil {
		return nil, err
	}
	return gr, nil
}

// Close waits for the stream's work and destroys it. An open capture is
// ended and its graph discarded.
func (s *stream) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.d.untrack(s)
	var errs []error
	if s.capturing.CompareAndSwap(true, false) {
		if g, e, err := s.d.hip.EndCapture(s.d.index, s.h); err == nil {
			_ = s.d.hip.GraphDestroy(s.d.index, g, e)
		}
	}
	if err := s.d.hip.StreamSynchronize(s.d.index, s.h); err != nil {
		errs = append(errs, wrap(err, "rocm: device %d: draining a stream", s.d.index))
	}
	if err := s.d.hip.StreamDestroy(s.d.index, s.h); err != nil {
		errs = append(errs, wrap(err, "rocm: device %d: destroying a stream", s.d.index))
	}
	return errors.Join(errs...)
}

// event is a HIP event of one device.
type event struct {
	d      *device
	h      hipEvent
	timing bool
	closed atomic.Bool
}

func (e *event) resourceKind() string { return "event" }

func (e *event) open() error {
	if e.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "rocm: device %d: event is closed", e.d.index)
	}
	return nil
}

// Synchronize waits until the event has completed or ctx ends (ErrTimeout
// wrapping ctx.Err()); like Stream.Synchronize it blocks in the runtime
// when ctx cannot end.
func (e *event) Synchronize(ctx context.Context) error {
	if err := e.open(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return wrap(e.d.hip.EventSynchronize(e.d.index, e.h), "rocm: device %d: synchronizing an event", e.d.index)
	}
	err := poll(ctx, func() (bool, error) { return e.d.hip.EventQuery(e.d.index, e.h) })
	if backend.CodeOf(err) == backend.CodeTimeout {
		return backend.Errorf(backend.CodeTimeout, "rocm: device %d: event not reached: %w", e.d.index, err)
	}
	return wrap(err, "rocm: device %d: synchronizing an event", e.d.index)
}

// Done reports whether the event has completed.
func (e *event) Done() (bool, error) {
	if err := e.open(); err != nil {
		return false, err
	}
	done, err := e.d.hip.EventQuery(e.d.index, e.h)
	if err != nil {
		return false, wrap(err, "rocm: device %d: querying an event", e.d.index)
	}
	return done, nil
}

// Elapsed is the device time between start and this event, both timing
// events that have completed.
func (e *event) Elapsed(start backend.Event) (time.Duration, error) {
	if err := e.open(); err != nil {
		return 0, err
	}
	s, ok := start.(*event)
	if !ok {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: %T is not a HIP event", e.d.index, start)
	}
	if !e.timing || !s.timing {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: elapsed time needs two timing events", e.d.index)
	}
	ms, err := e.d.hip.EventElapsed(e.d.index, s.h, e.h)
	if err != nil {
		return 0, wrap(err, "rocm: device %d: elapsed time", e.d.index)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event.
func (e *event) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	e.d.untrack(e)
	return wrap(e.d.hip.EventDestroy(e.d.index, e.h), "rocm: device %d: destroying an event", e.d.index)
}

// graph is an instantiated HIP graph.
type graph struct {
	d      *device
	g      hipGraph
	e      hipGraphExec
	closed atomic.Bool
}

func (g *graph) resourceKind() string { return "graph" }

// Launch enqueues one replay on s, a stream of the device it was captured
// on.
func (g *graph) Launch(s backend.Stream) error {
	if g.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "rocm: device %d: graph is closed", g.d.index)
	}
	st, ok := s.(*stream)
	if !ok || st.d.index != g.d.index || st.d.b != g.d.b {
		return backend.Errorf(backend.CodeInvalidArgument, "rocm: device %d: %T is not a stream of this device", g.d.index, s)
	}
	if err := st.open(); err != nil {
		return err
	}
	return wrap(g.d.hip.GraphLaunch(g.d.index, g.e, st.h), "rocm: device %d: launching a graph", g.d.index)
}

// Close destroys the graph.
func (g *graph) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	g.d.untrack(g)
	return wrap(g.d.hip.GraphDestroy(g.d.index, g.g, g.e), "rocm: device %d: destroying a graph", g.d.index)
}

var (
	_ backend.Stream = (*stream)(nil)
	_ backend.Event  = (*event)(nil)
	_ backend.Graph  = (*graph)(nil)
)
