package fake

import (
	"context"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
)

// mark is one completion point in a stream: one Record of an event, or one
// Synchronize.
type mark struct {
	done chan struct{}
	at   time.Time // completion time; written before done is closed
	err  error     // the stream's sticky error at completion
}

func newMark() *mark { return &mark{done: make(chan struct{})} }

func (m *mark) complete(err error) {
	m.at, m.err = time.Now(), err
	close(m.done)
}

// wait blocks until m completes or ctx ends.
func (m *mark) wait(ctx context.Context, what string) error {
	select {
	case <-m.done:
		return m.err
	case <-ctx.Done():
		return backend.Wrap(backend.CodeTimeout, ctx.Err(), "fake: waiting for "+what)
	}
}

// event points at the mark of its latest Record; an event never recorded
// counts as complete, as in CUDA.
type event struct {
	st     *deviceState
	timing bool

	mu     sync.Mutex
	cur    *mark
	closed bool
}

var _ backend.Event = (*event)(nil)

func (e *event) set(m *mark) {
	e.mu.Lock()
	e.cur = m
	e.mu.Unlock()
}

func (e *event) current() *mark {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

func (e *event) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Synchronize waits for the latest record and returns the recording
// stream's sticky error.
func (e *event) Synchronize(ctx context.Context) error {
	m := e.current()
	if m == nil {
		return nil
	}
	return m.wait(ctx, "event")
}

// Done reports whether the latest record has completed.
func (e *event) Done() (bool, error) {
	m := e.current()
	if m == nil {
		return true, nil
	}
	select {
	case <-m.done:
		return true, m.err
	default:
		return false, nil
	}
}

// Elapsed is the wall-clock time between the completions of start and e.
func (e *event) Elapsed(start backend.Event) (time.Duration, error) {
	s, ok := start.(*event)
	if !ok || s == nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "fake: elapsed from a %T, not a fake event", start)
	}
	if !e.timing || !s.timing {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "fake: elapsed needs two timing events")
	}
	var at [2]time.Time
	for i, ev := range []*event{s, e} {
		m := ev.current()
		if m == nil {
			return 0, backend.Errorf(backend.CodeInvalidArgument, "fake: elapsed: an event was never recorded")
		}
		select {
		case <-m.done:
		default:
			return 0, backend.Errorf(backend.CodeInvalidArgument, "fake: elapsed: an event has not completed")
		}
		if m.err != nil {
			return 0, m.err
		}
		at[i] = m.at
	}
	return at[1].Sub(at[0]), nil
}

// Close releases the event; it can no longer be recorded or waited for.
func (e *event) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	return nil
}
