package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/intranode/intranode/backend"
)

// Prefixed is a view of a Store under a key prefix: key k of the view is key
// prefix+k of the underlying store. Views of one store with distinct
// prefixes share it without seeing each other's keys, as the per-host
// groups of a multi-host job do ("host/<name>/"); a prefix should end in a
// separator so that no view's prefix is a prefix of another's keys.
//
// Closing a view ends that view only: its pending calls return, and its
// later calls fail, with an error matching backend.ErrClosed. The
// underlying store stays open for its other users, and its owner closes it.
type Prefixed struct {
	s      Store
	prefix string

	life    context.Context // ended by Close
	end     context.CancelFunc
	once    sync.Once
	release func() error // run once by Close, after the view has ended
}

var _ Store = (*Prefixed)(nil)

// NewPrefixed returns a view of s under prefix. An empty prefix gives a view
// with the same keys as s that can be closed on its own.
func NewPrefixed(s Store, prefix string) (*Prefixed, error) {
	if s == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "prefixed store %q: nil store", prefix)
	}
	return newView(s, prefix, nil), nil
}

func newView(s Store, prefix string, release func() error) *Prefixed {
	life, end := context.WithCancel(context.Background())
	return &Prefixed{s: s, prefix: prefix, life: life, end: end, release: release}
}

// Prefix returns the view's prefix.
func (p *Prefixed) Prefix() string { return p.prefix }

// Unwrap returns the underlying store.
func (p *Prefixed) Unwrap() Store { return p.s }

// begin checks that the view is open and returns ctx, cancelled also when
// the view closes, so that Close wakes the view's waiters without closing
// the underlying store.
func (p *Prefixed) begin(ctx context.Context, op, key string) (context.Context, context.CancelFunc, error) {
	if p.life.Err() != nil {
		return nil, nil, p.closedError(op, key)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.life, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// finish reports err, or that the view closed if that is why the call ended.
func (p *Prefixed) finish(err error, op, key string) error {
	if err != nil && p.life.Err() != nil {
		return p.closedError(op, key)
	}
	return err
}

func (p *Prefixed) closedError(op, key string) error {
	return backend.Errorf(backend.CodeClosed, "prefixed store %s %q: view %q is closed", op, key, p.prefix)
}

// Set stores value under prefix+key.
func (p *Prefixed) Set(ctx context.Context, key string, value []byte) error {
	ctx, done, err := p.begin(ctx, "set", key)
	if err != nil {
		return err
	}
	defer done()
	return p.finish(p.s.Set(ctx, p.prefix+key, value), "set", key)
}

// Get returns the value of prefix+key, waiting until it is set.
func (p *Prefixed) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, done, err := p.begin(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer done()
	v, err := p.s.Get(ctx, p.prefix+key)
	if err = p.finish(err, "get", key); err != nil {
		return nil, err
	}
	return v, nil
}

// Wait blocks until every prefixed key is set.
func (p *Prefixed) Wait(ctx context.Context, keys ...string) error {
	ctx, done, err := p.begin(ctx, "wait", firstKey(keys))
	if err != nil {
		return err
	}
	defer done()
	return p.finish(p.s.Wait(ctx, p.keys(keys)...), "wait", firstKey(keys))
}

// Add adds delta to the counter at prefix+key.
func (p *Prefixed) Add(ctx context.Context, key string, delta int64) (int64, error) {
	ctx, done, err := p.begin(ctx, "add", key)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := p.s.Add(ctx, p.prefix+key, delta)
	if err = p.finish(err, "add", key); err != nil {
		return 0, err
	}
	return n, nil
}

// CompareAndSet swaps the value of prefix+key as Store.CompareAndSet does.
func (p *Prefixed) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	ctx, done, err := p.begin(ctx, "compare-and-set", key)
	if err != nil {
		return nil, err
	}
	defer done()
	v, err := p.s.CompareAndSet(ctx, p.prefix+key, expected, desired)
	if err = p.finish(err, "compare-and-set", key); err != nil {
		return nil, err
	}
	return v, nil
}

// Check reports whether every prefixed key is set.
func (p *Prefixed) Check(ctx context.Context, keys ...string) (bool, error) {
	ctx, done, err := p.begin(ctx, "check", firstKey(keys))
	if err != nil {
		return false, err
	}
	defer done()
	ok, err := p.s.Check(ctx, p.keys(keys)...)
	if err = p.finish(err, "check", firstKey(keys)); err != nil {
		return false, err
	}
	return ok, nil
}

// Delete removes prefix+key and reports whether it existed.
func (p *Prefixed) Delete(ctx context.Context, key string) (bool, error) {
	ctx, done, err := p.begin(ctx, "delete", key)
	if err != nil {
		return false, err
	}
	defer done()
	existed, err := p.s.Delete(ctx, p.prefix+key)
	if err = p.finish(err, "delete", key); err != nil {
		return false, err
	}
	return existed, nil
}

// Close ends the view and wakes its pending calls; the underlying store
// stays open. Closing twice is harmless.
func (p *Prefixed) Close() error {
	var err error
	p.once.Do(func() {
		p.end()
		if p.release != nil {
			if rerr := p.release(); rerr != nil {
				err = backend.Wrap(backend.CodeOf(rerr), rerr, fmt.Sprintf("prefixed store %q: close", p.prefix))
			}
		}
	})
	return err
}

func (p *Prefixed) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.prefix + k
	}
	return out
}
