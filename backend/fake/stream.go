package fake

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/intranode/intranode/backend"
)

// op is one unit of queued stream work. At most one field is set in
// practice; an op with none is a no-op.
type op struct {
	name string
	// run is device work: skipped once the stream has failed.
	run func(ctx context.Context, mem *Lease) error
	// wait holds the stream until another stream reaches a mark.
	wait *mark
	// done is completed, with the stream's sticky error, when the stream
	// reaches it (events and Synchronize).
	done *mark
}

// step builds the op for one submission. Direct calls build it at once;
// captured calls keep the step so that every graph replay gets fresh marks
// and waits on the event's record current at replay time. Steps run with
// the stream's lock held.
type step func() op

// stream runs its queue on one goroutine, in order.
type stream struct {
	dev    *device
	id     int64
	ctx    context.Context // cancelled by Close; kernels receive it
	cancel context.CancelFunc
	exited chan struct{}

	mu        sync.Mutex
	cond      *sync.Cond
	queue     []op
	closing   bool
	capturing bool
	captured  []step
}

var _ backend.Stream = (*stream)(nil)

func newStream(d *device) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{
		dev:    d,
		id:     d.st.streams.Add(1),
		ctx:    ctx,
		cancel: cancel,
		exited: make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	go s.loop()
	return s
}

func (s *stream) String() string { return fmt.Sprintf("device %d stream %d", s.dev.st.index, s.id) }

// loop is the stream's goroutine. The sticky error is local to it: it is
// the only writer, and marks carry it to readers.
func (s *stream) loop() {
	defer close(s.exited)
	var sticky error
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closing {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		o := s.queue[0]
		s.queue[0] = op{}
		s.queue = s.queue[1:]
		s.mu.Unlock()

		if o.wait != nil {
			select {
			case <-o.wait.done:
			case <-s.ctx.Done():
			}
		}
		if o.run != nil && sticky == nil {
			if err := s.execute(o); err != nil {
				sticky = err
				s.dev.log.Debug("fake: stream failed", "stream", s.String(), "op", o.name, "err", err)
			}
		}
		if o.done != nil {
			o.done.complete(sticky)
		}
	}
}

// execute runs device work with a fresh lease, turning a panic into an
// internal error so that a broken kernel fails its stream, not the process.
func (s *stream) execute(o op) (err error) {
	mem := addresses.Lease()
	defer mem.Release()
	func() {
		defer func() {
			if r := recover(); r != nil {
				s.dev.log.Debug("fake: kernel panic", "op", o.name, "panic", r, "stack", string(debug.Stack()))
				err = backend.Errorf(backend.CodeInternal, "panicked: %v", r)
			}
		}()
		err = o.run(s.ctx, mem)
	}()
	if err == nil {
		return nil
	}
	code := backend.CodeOf(err)
	if code == backend.CodeUnknown {
		code = backend.CodeInternal
	}
	return &backend.Error{Code: code, Msg: fmt.Sprintf("fake: %s: %s", s, o.name), Err: err}
}

// submit enqueues (or, while capturing, records) steps, all or none.
func (s *stream) submit(steps ...step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return backend.Errorf(backend.CodeClosed, "fake: %s is closed", s)
	}
	if s.capturing {
		s.captured = append(s.captured, steps...)
		return nil
	}
	for _, st := range steps {
		s.queue = append(s.queue, st())
	}
	s.cond.Signal()
	return nil
}

// Launch enqueues fn, which must come from a module loaded on this device.
func (s *stream) Launch(fn backend.Function, cfg backend.LaunchConfig, args ...backend.Arg) error {
	f, ok := fn.(*function)
	if !ok || f == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "fake: %s: launch of a %T, not a fake kernel", s, fn)
	}
	if f.mod.dev.st != s.dev.st {
		return backend.Errorf(backend.CodeInvalidArgument, "fake: %s: kernel %s belongs to a module of device %d", s, f.name, f.mod.dev.st.index)
	}
	if f.mod.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "fake: %s: module %q of kernel %s is closed", s, f.mod.name, f.name)
	}
	for _, d := range []backend.Dim3{cfg.Grid, cfg.Block} {
		if d.X == 0 || d.Y == 0 || d.Z == 0 {
			return backend.Errorf(backend.CodeInvalidArgument, "fake: %s: launch of %s with grid %v block %v: every dimension must be at least 1", s, f.name, cfg.Grid, cfg.Block)
		}
	}
	args = slices.Clone(args)
	name := f.mod.name + "." + f.name
	dev := s.dev.st.index
	o := op{name: "kernel " + name, run: func(ctx context.Context, mem *Lease) error {
		if f.mod.closed.Load() {
			return backend.Errorf(backend.CodeClosed, "module %q was closed before the kernel ran", f.mod.name)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(f.mod.unloaded, cancel)()
		return f.kernel(ctx, &Launch{Mem: mem, Config: cfg, Args: args, Device: dev})
	}}
	return s.submit(func() op { return o })
}

// CopyAsync enqueues a copy of n bytes; overlapping ranges copy as memmove.
func (s *stream) CopyAsync(dst, src backend.DevicePtr, n int) error {
	for _, p := range []backend.DevicePtr{dst, src} {
		if _, err := addresses.find(p, n, false); err != nil {
			return fmt.Errorf("fake: %s: async copy: %w", s, err)
		}
	}
	o := op{name: "copy", run: func(_ context.Context, mem *Lease) error {
		d, err := mem.Bytes(dst, n)
		if err != nil {
			return err
		}
		sb, err := mem.Bytes(src, n)
		if err != nil {
			return err
		}
		copy(d, sb)
		return nil
	}}
	return s.submit(func() op { return o })
}

// Record enqueues ev; ev must have been created on this device.
func (s *stream) Record(ev backend.Event) error {
	e, err := s.event(ev)
	if err != nil {
		return err
	}
	if e.st != s.dev.st {
		return backend.Errorf(backend.CodeInvalidArgument, "fake: %s: recording an event of device %d", s, e.st.index)
	}
	return s.submit(func() op {
		m := newMark()
		e.set(m)
		return op{done: m}
	})
}

// WaitEvent holds later work until ev's latest record (at submission, or
// at replay for a captured wait) completes. Events of any fake device work.
func (s *stream) WaitEvent(ev backend.Event) error {
	e, err := s.event(ev)
	if err != nil {
		return err
	}
	return s.submit(func() op { return op{wait: e.current()} })
}

func (s *stream) event(ev backend.Event) (*event, error) {
	e, ok := ev.(*event)
	if !ok || e == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: %s: %T is not a fake event", s, ev)
	}
	if e.isClosed() {
		return nil, backend.Errorf(backend.CodeClosed, "fake: %s: event is closed", s)
	}
	return e, nil
}

// Synchronize waits for the work submitted so far and returns the stream's
// sticky error, if any.
func (s *stream) Synchronize(ctx context.Context) error {
	m := newMark()
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return backend.Errorf(backend.CodeClosed, "fake: %s is closed", s)
	case s.capturing:
		s.mu.Unlock()
		return backend.Errorf(backend.CodeNotSupported, "fake: %s: synchronize while capturing", s)
	}
	s.queue = append(s.queue, op{done: m})
	s.cond.Signal()
	s.mu.Unlock()
	return m.wait(ctx, s.String())
}

// BeginCapture starts recording.
func (s *stream) BeginCapture() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return backend.Errorf(backend.CodeClosed, "fake: %s is closed", s)
	case s.capturing:
		return backend.Errorf(backend.CodeInvalidArgument, "fake: %s is already capturing", s)
	}
	s.capturing, s.captured = true, nil
	return nil
}

// EndCapture stops recording and returns what was recorded.
func (s *stream) EndCapture() (backend.Graph, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.capturing {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "fake: %s is not capturing", s)
	}
	g := &graph{st: s.dev.st, steps: s.captured}
	s.capturing, s.captured = false, nil
	return g, nil
}

// Close cancels the kernel context, lets the queue drain (kernels still run,
// seeing the cancelled context; events complete) and stops the goroutine.
func (s *stream) Close() error {
	s.mu.Lock()
	first := !s.closing
	s.closing, s.capturing, s.captured = true, false, nil
	s.cond.Broadcast()
	s.mu.Unlock()
	s.cancel()
	<-s.exited
	if first {
		s.dev.forget(s)
	}
	return nil
}
