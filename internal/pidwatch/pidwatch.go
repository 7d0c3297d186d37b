package pidwatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/intranode/intranode/backend"
)

// Peer is a rank's process as it announced itself.
type Peer struct {
	Rank int
	PID  int
	// Namespace is the peer's PID namespace (Namespace's value there);
	// a peer whose namespace differs from this process's is not watched.
	Namespace string
}

// Namespace names this process's PID namespace ("pid:[4026531836]"), or
// is empty where it cannot be read.
func Namespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// Watch returns a context that ends, with a cause matching
// backend.ErrPeerFailed that names the rank and its process, when one of
// peers exits before finished(its rank) says it had finished with this
// rank (finished may be nil: every exit counts); the returned stop ends the
// watch and must be called. Peers that are this process, or in another PID
// namespace (or when this process's cannot be read), are not watched.
func Watch(ctx context.Context, peers []Peer, finished func(rank int) bool) (context.Context, func()) {
	self, ns := os.Getpid(), Namespace()
	var watched []Peer
	for _, p := range peers {
		if p.PID > 0 && p.PID != self && ns != "" && p.Namespace == ns {
			watched = append(watched, p)
		}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	if len(watched) == 0 {
		return wctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if p, ok := wait(done, watched, finished); ok {
			cancel(Exited(p))
		}
	})
	var once sync.Once
	return wctx, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			cancel(nil)
		})
	}
}

// Exited is the error for a peer whose process has ended.
func Exited(p Peer) error {
	return backend.Errorf(backend.CodePeerFailed, "rank %d (process %d) has exited", p.Rank, p.PID)
}

// Cause is the watch's cause in place of err when ctx ended because a
// peer exited and err is what that did to the wait (a cancelled context, a
// timeout, a peer failure; err is then kept as text, not as an error to
// match): a peer failure, not a timeout. Any other error (a verdict the
// ranks reached before the peer left, say) is returned as it is.
func Cause(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	c := context.Cause(ctx)
	if c == nil || c == ctx.Err() || backend.CodeOf(c) != backend.CodePeerFailed {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, backend.ErrTimeout) || errors.Is(err, backend.ErrPeerFailed) {
		return fmt.Errorf("%w (while: %v)", c, err)
	}
	return err
}
