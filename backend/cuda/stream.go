//go:build cuda

package cuda

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
)

// Waiting on the device polls the driver: it spins for spinFor (the usual
// case for short collectives, where a sleep would cost more than the work),
// then yields, then sleeps with a growing interval up to maxSleep, checking
// the context between polls so a hung peer ends in ErrTimeout, never a hang.
const (
	spinFor  = 50 * time.Microsecond
	yieldFor = time.Millisecond
	minSleep = 10 * time.Microsecond
	maxSleep = time.Millisecond
)

// poll calls query until it reports something other than not-ready, or ctx
// ends. It returns the last CUresult, or ctx's error.
func poll(ctx context.Context, query func() int) (int, error) {
	start := time.Now()
	sleep := minSleep
	for {
		if r := query(); r != resultNotReady {
			return r, nil
		}
		if err := ctx.Err(); err != nil {
			return resultNotReady, err
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

// stream is a non-blocking CUDA stream of one device.
type stream struct {
	d         *device
	h         streamHandle
	closed    atomic.Bool
	capturing atomic.Bool
}

func (s *stream) resourceKind() string { return "stream" }

func (s *stream) open() error {
	if s.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "cuda: device %d: stream is closed", s.d.index)
	}
	return nil
}

// Launch enqueues fn. The arguments are packed as backend.MarshalArgs lays
// them out, into a buffer on the stack, and handed to cuLaunchKernel with
// CU_LAUNCH_PARAM_BUFFER_POINTER, which copies them before returning: a
// launch allocates nothing and makes one cgo call.
func (s *stream) Launch(fn backend.Function, cfg backend.LaunchConfig, args ...backend.Arg) error {
	if err := s.open(); err != nil {
		return err
	}
	f, ok := fn.(*function)
	if !ok || f.m.d.ctx != s.d.ctx {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: %T is not a function loaded on this device", s.d.index, fn)
	}
	if f.m.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "cuda: device %d: module of %s is unloaded", s.d.index, f.name)
	}
	size, err := paramSize(args)
	if err != nil {
		return err
	}
	// Words, not bytes, so the buffer is 8-byte aligned like the
	// parameter space it is copied into.
	var inline [inlineParams / 8]uint64
	words := inline[:]
	if size > inlineParams {
		words = make([]uint64, size/8)
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	packParams(buf, args)
	early := cfg.Early && s.d.b.devices[s.d.index].early
	if err := launch(s.d.ctx, f.h, cfg, s.h, buf, early); err != nil {
		return wrap(err, "cuda: device %d: launching %s (grid %v, block %v, %d shared bytes)", s.d.index, f.name, cfg.Grid, cfg.Block, cfg.SharedMem)
	}
	return nil
}

// CopyAsync enqueues a device-to-device copy (peer memory included).
func (s *stream) CopyAsync(dst, src backend.DevicePtr, n int) error {
	if err := s.open(); err != nil {
		return err
	}
	if n < 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: copy of %d bytes", s.d.index, n)
	}
	if n == 0 {
		return nil
	}
	return wrap(copyDtoDAsync(s.d.ctx, dst, src, n, s.h), "cuda: device %d: enqueueing a copy of %d bytes", s.d.index, n)
}

// Record enqueues ev.
func (s *stream) Record(ev backend.Event) error {
	if err := s.open(); err != nil {
		return err
	}
	e, ok := ev.(*event)
	if !ok {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: %T is not a CUDA event", s.d.index, ev)
	}
	return wrap(eventRecord(s.d.ctx, e.h, s.h), "cuda: device %d: recording an event", s.d.index)
}

// WaitEvent makes later work on s wait for ev, which may belong to another
// device.
func (s *stream) WaitEvent(ev backend.Event) error {
	if err := s.open(); err != nil {
		return err
	}
	e, ok := ev.(*event)
	if !ok {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: %T is not a CUDA event", s.d.index, ev)
	}
	return wrap(streamWaitEvent(s.d.ctx, s.h, e.h), "cuda: device %d: waiting for an event", s.d.index)
}

// Synchronize waits for the stream's work. With a context that can end it
// polls cuStreamQuery and returns ErrTimeout wrapping ctx.Err() when ctx
// ends first; with one that cannot (context.Background) it blocks in
// cuStreamSynchronize.
func (s *stream) Synchronize(ctx context.Context) error {
	if err := s.open(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return wrap(streamSync(s.d.ctx, s.h), "cuda: device %d: synchronizing a stream", s.d.index)
	}
	r, err := poll(ctx, func() int { return streamQuery(s.d.ctx, s.h) })
	if err != nil {
		return backend.Errorf(backend.CodeTimeout, "cuda: device %d: stream still busy: %w", s.d.index, err)
	}
	return wrap(checkResult("cuStreamQuery", r), "cuda: device %d: synchronizing a stream", s.d.index)
}

// BeginCapture starts recording the stream's work into a graph.
//
// The capture runs in CU_STREAM_CAPTURE_MODE_RELAXED. The other two modes
// tie the capture to the OS thread that began it (thread-local) or police
// every thread (global), and both require cuStreamEndCapture on the thread
// that called cuStreamBeginCapture. A goroutine may move between threads
// between BeginCapture and EndCapture, and unrelated goroutines share
// threads, so only relaxed mode is sound from Go. The cost is that the
// driver no longer rejects "unsafe" calls (synchronous copies, allocations)
// made while a capture is open; don't make them on this device until
// EndCapture.
func (s *stream) BeginCapture() error {
	if err := s.open(); err != nil {
		return err
	}
	if !s.capturing.CompareAndSwap(false, true) {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: stream is already capturing", s.d.index)
	}
	if err := beginCapture(s.d.ctx, s.h); err != nil {
		s.capturing.Store(false)
		return wrap(err, "cuda: device %d: beginning a capture", s.d.index)
	}
	return nil
}

// EndCapture stops recording and instantiates the graph.
func (s *stream) EndCapture() (backend.Graph, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if !s.capturing.CompareAndSwap(true, false) {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: stream is not capturing", s.d.index)
	}
	g, e, err := endCapture(s.d.ctx, s.h)
	if err != nil {
		return nil, wrap(err, "cuda: device %d: ending a capture", s.d.index)
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
		if g, e, err := endCapture(s.d.ctx, s.h); err == nil {
			_ = graphDestroy(s.d.ctx, g, e)
		}
	}
	if err := streamSync(s.d.ctx, s.h); err != nil {
		errs = append(errs, wrap(err, "cuda: device %d: draining a stream", s.d.index))
	}
	if err := streamDestroy(s.d.ctx, s.h); err != nil {
		errs = append(errs, wrap(err, "cuda: device %d: destroying a stream", s.d.index))
	}
	return errors.Join(errs...)
}

// event is a CUDA event of one device.
type event struct {
	d      *device
	h      eventHandle
	timing bool
	closed atomic.Bool
}

func (e *event) resourceKind() string { return "event" }

func (e *event) open() error {
	if e.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "cuda: device %d: event is closed", e.d.index)
	}
	return nil
}

// Synchronize waits until the event has completed or ctx ends (ErrTimeout
// wrapping ctx.Err()); like Stream.Synchronize it blocks in the driver when
// ctx cannot end.
func (e *event) Synchronize(ctx context.Context) error {
	if err := e.open(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return wrap(eventSync(e.d.ctx, e.h), "cuda: device %d: synchronizing an event", e.d.index)
	}
	r, err := poll(ctx, func() int { return eventQuery(e.d.ctx, e.h) })
	if err != nil {
		return backend.Errorf(backend.CodeTimeout, "cuda: device %d: event not reached: %w", e.d.index, err)
	}
	return wrap(checkResult("cuEventQuery", r), "cuda: device %d: synchronizing an event", e.d.index)
}

// Done reports whether the event has completed.
func (e *event) Done() (bool, error) {
	if err := e.open(); err != nil {
		return false, err
	}
	r := eventQuery(e.d.ctx, e.h)
	if r == resultNotReady {
		return false, nil
	}
	if err := checkResult("cuEventQuery", r); err != nil {
		return false, wrap(err, "cuda: device %d: querying an event", e.d.index)
	}
	return true, nil
}

// Elapsed is the device time between start and this event, both timing
// events that have completed.
func (e *event) Elapsed(start backend.Event) (time.Duration, error) {
	if err := e.open(); err != nil {
		return 0, err
	}
	s, ok := start.(*event)
	if !ok {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: %T is not a CUDA event", e.d.index, start)
	}
	if !e.timing || !s.timing {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: elapsed time needs two timing events", e.d.index)
	}
	ms, err := eventElapsed(e.d.ctx, s.h, e.h)
	if err != nil {
		return 0, wrap(err, "cuda: device %d: elapsed time", e.d.index)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event.
func (e *event) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	e.d.untrack(e)
	return wrap(eventDestroy(e.d.ctx, e.h), "cuda: device %d: destroying an event", e.d.index)
}

// graph is an instantiated CUDA graph.
type graph struct {
	d      *device
	g      graphHandle
	e      execHandle
	closed atomic.Bool
}

func (g *graph) resourceKind() string { return "graph" }

// Launch enqueues one replay on s, a stream of the device it was captured
// on.
func (g *graph) Launch(s backend.Stream) error {
	if g.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "cuda: device %d: graph is closed", g.d.index)
	}
	st, ok := s.(*stream)
	if !ok || st.d.ctx != g.d.ctx {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: device %d: %T is not a stream of this device", g.d.index, s)
	}
	if err := st.open(); err != nil {
		return err
	}
	return wrap(graphLaunch(g.d.ctx, g.e, st.h), "cuda: device %d: launching a graph", g.d.index)
}

// Close destroys the graph.
func (g *graph) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	g.d.untrack(g)
	return wrap(graphDestroy(g.d.ctx, g.g, g.e), "cuda: device %d: destroying a graph", g.d.index)
}

var (
	_ backend.Stream = (*stream)(nil)
	_ backend.Event  = (*event)(nil)
	_ backend.Graph  = (*graph)(nil)
)
