package store

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/intranode/intranode/backend"
)

// Mem is an in-process Store: a map guarded by a mutex. Goroutines waiting
// for a key sleep on a channel that the Set of that key closes, so waits
// cost nothing until they are woken. The TCP server keeps its keys in one.
type Mem struct {
	opts options

	mu      sync.Mutex
	data    map[string][]byte
	waiters map[string]*memWaiter
	closed  bool
	done    chan struct{} // closed by Close, wakes every waiter
}

// memWaiter is the wake-up channel of one missing key, shared by everyone
// waiting for it; n counts them so the last one to give up removes it.
type memWaiter struct {
	ch chan struct{}
	n  int
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-process store. It honours WithTimeout,
// WithMaxKeys and WithLogger.
func NewMem(opts ...Option) *Mem {
	return &Mem{
		opts:    buildOptions(opts),
		data:    make(map[string][]byte),
		waiters: make(map[string]*memWaiter),
		done:    make(chan struct{}),
	}
}

func (m *Mem) closedError(op, key string) error {
	return backend.Errorf(backend.CodeClosed, "mem store %s %q: store is closed", op, key)
}

// put stores value (owned by the store from now on) and wakes the key's
// waiters. The caller holds m.mu.
func (m *Mem) put(op, key string, value []byte) error {
	if _, ok := m.data[key]; !ok && len(m.data) >= m.opts.maxKeys {
		return backend.Errorf(backend.CodeOutOfMemory, "mem store %s %q: store is full (%d keys)", op, key, m.opts.maxKeys)
	}
	m.data[key] = value
	if w, ok := m.waiters[key]; ok {
		close(w.ch)
		delete(m.waiters, key)
	}
	return nil
}

// Set stores a copy of value under key.
func (m *Mem) Set(ctx context.Context, key string, value []byte) error {
	v := cloneBytes(value)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return m.closedError("set", key)
	}
	return m.put("set", key, v)
}

// lookup returns a copy of key's value without waiting.
func (m *Mem) lookup(key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false, m.closedError("get", key)
	}
	v, ok := m.data[key]
	if !ok {
		return nil, false, nil
	}
	return cloneBytes(v), true, nil
}

// Get returns a copy of key's value, waiting until it is set.
func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	if v, ok, err := m.lookup(key); ok || err != nil {
		return v, err
	}
	ctx, cancel := withDeadline(ctx, m.opts.timeout)
	defer cancel()
	for {
		if err := m.waitFor(ctx, "get", key); err != nil {
			return nil, err
		}
		// The key can be deleted again between the wake-up and the read;
		// then keep waiting.
		if v, ok, err := m.lookup(key); ok || err != nil {
			return v, err
		}
	}
}

// waitFor blocks until key is set (returning at once if it is), the store
// closes, or ctx ends.
func (m *Mem) waitFor(ctx context.Context, op, key string) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return m.closedError(op, key)
	}
	if _, ok := m.data[key]; ok {
		m.mu.Unlock()
		return nil
	}
	w, ok := m.waiters[key]
	if !ok {
		w = &memWaiter{ch: make(chan struct{})}
		m.waiters[key] = w
	}
	w.n++
	m.mu.Unlock()

	select {
	case <-w.ch:
		return nil
	case <-m.done:
		return m.closedError(op, key)
	case <-ctx.Done():
		m.mu.Lock()
		// The channel may already have been closed and removed by a Set,
		// or replaced after one; only release our share of this one.
		if cur, ok := m.waiters[key]; ok && cur == w {
			w.n--
			if w.n == 0 {
				delete(m.waiters, key)
			}
		}
		m.mu.Unlock()
		return timeoutError(ctx, fmt.Sprintf("mem store %s %q", op, key))
	}
}

// Wait blocks until every key is set.
func (m *Mem) Wait(ctx context.Context, keys ...string) error {
	ctx, cancel := withDeadline(ctx, m.opts.timeout)
	defer cancel()
	for {
		missing, err := m.firstMissing(keys)
		if err != nil || missing < 0 {
			return err
		}
		if err := m.waitFor(ctx, "wait", keys[missing]); err != nil {
			return err
		}
	}
}

// firstMissing returns the index of the first unset key, -1 if all are set.
func (m *Mem) firstMissing(keys []string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, backend.Errorf(backend.CodeClosed, "mem store: store is closed")
	}
	for i, k := range keys {
		if _, ok := m.data[k]; !ok {
			return i, nil
		}
	}
	return -1, nil
}

// Add adds delta to the decimal counter at key.
func (m *Mem) Add(ctx context.Context, key string, delta int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, m.closedError("add", key)
	}
	old, ok := m.data[key]
	n, err := AddCounter(key, old, ok, delta)
	if err != nil {
		return 0, err
	}
	if err := m.put("add", key, fmt.Appendf(nil, "%d", n)); err != nil {
		return 0, err
	}
	return n, nil
}

// CompareAndSet sets key to desired if it holds expected (missing equals an
// empty expected) and returns the value it holds afterwards.
func (m *Mem) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, m.closedError("compare-and-set", key)
	}
	old, ok := m.data[key]
	if (ok && bytes.Equal(old, expected)) || (!ok && len(expected) == 0) {
		v := cloneBytes(desired)
		if err := m.put("compare-and-set", key, v); err != nil {
			return nil, err
		}
		return cloneBytes(v), nil
	}
	return cloneBytes(old), nil
}

// Check reports whether every key is set.
func (m *Mem) Check(ctx context.Context, keys ...string) (bool, error) {
	missing, err := m.firstMissing(keys)
	return err == nil && missing < 0, err
}

// Delete removes key and reports whether it existed.
func (m *Mem) Delete(ctx context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, m.closedError("delete", key)
	}
	_, ok := m.data[key]
	delete(m.data, key)
	return ok, nil
}

// Len returns the number of keys set.
func (m *Mem) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.data)
}

// Keys returns the keys that start with prefix, sorted.
func (m *Mem) Keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// waiting returns how many keys have goroutines waiting for them.
func (m *Mem) waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiters)
}

// Close drops every key and wakes every waiter with an error matching
// backend.ErrClosed. Closing twice is harmless.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		m.data = nil
		m.waiters = nil
		close(m.done)
	}
	return nil
}
