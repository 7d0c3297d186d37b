package fake

import (
	"sync/atomic"

	"github.com/intranode/intranode/backend"
)

// graph is captured work: the steps a stream recorded while capturing.
type graph struct {
	st     *deviceState
	steps  []step
	closed atomic.Bool
}

var _ backend.Graph = (*graph)(nil)

// Launch enqueues one replay on s, any stream of the capturing device. On a
// stream that is itself capturing, the replay is recorded.
func (g *graph) Launch(s backend.Stream) error {
	if g.closed.Load() {
		return backend.Errorf(backend.CodeClosed, "fake: graph is closed")
	}
	fs, ok := s.(*stream)
	if !ok || fs == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "fake: graph launch on a %T, not a fake stream", s)
	}
	if fs.dev.st != g.st {
		return backend.Errorf(backend.CodeInvalidArgument, "fake: graph of device %d launched on %s", g.st.index, fs)
	}
	return fs.submit(g.steps...)
}

// Close releases the graph.
func (g *graph) Close() error {
	g.closed.Store(true)
	return nil
}
