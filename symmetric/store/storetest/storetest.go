// Package storetest is the conformance suite every store.Store
// implementation passes. A store's test supplies a Harness and calls Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
//			s := store.NewMem()
//			t.Cleanup(func() { s.Close() })
//			return []store.Store{s}
//		}))
//	}
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// Harness creates the stores the suite runs against.
type Harness interface {
	// NewClients creates a fresh, empty store and returns n clients of it
	// (n >= 1): writes through any client are visible to all. Clients may
	// be one shared value when the store has no notion of clients, except
	// that then closing one closes all. The harness closes what it created
	// when t ends (t.Cleanup).
	NewClients(t *testing.T, n int) []store.Store
}

// HarnessFunc adapts a function to Harness.
type HarnessFunc func(t *testing.T, n int) []store.Store

// NewClients calls f.
func (f HarnessFunc) NewClients(t *testing.T, n int) []store.Store { return f(t, n) }

// shortWait is how long cases wait for something that must not happen; it
// is a deadline for the store, never an assertion on elapsed time.
const shortWait = 50 * time.Millisecond

// promptly bounds how long a call whose deadline has passed may take to
// return. It is generous so loaded machines pass, yet far below any
// store's default timeout.
const promptly = 20 * time.Second

// Run runs every case as a subtest of t, each on fresh stores from h.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"SetGet", testSetGet},
		{"GetWaitsForSet", testGetWaitsForSet},
		{"GetTimeout", testGetTimeout},
		{"GetCanceled", testGetCanceled},
		{"Wait", testWait},
		{"WaitTimeout", testWaitTimeout},
		{"Check", testCheck},
		{"Delete", testDelete},
		{"Add", testAdd},
		{"AddConcurrent", testAddConcurrent},
		{"CompareAndSet", testCompareAndSet},
		{"CompareAndSetConcurrent", testCompareAndSetConcurrent},
		{"LargeValue", testLargeValue},
		{"BinaryKeysAndValues", testBinaryKeysAndValues},
		{"ValuesAreCopied", testValuesAreCopied},
		{"ClientsSeeEachOther", testClientsSeeEachOther},
		{"Close", testClose},
		{"CloseWakesWaiters", testCloseWakesWaiters},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

func one(t *testing.T, h Harness) store.Store {
	clients := h.NewClients(t, 1)
	require.Len(t, clients, 1)
	return clients[0]
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testSetGet(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	tests := []struct {
		name, key string
		values    []string
	}{
		{"once", "a", []string{"1"}},
		{"overwrite", "b", []string{"first", "second", "third"}},
		{"empty value", "c", []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range tc.values {
				require.NoError(t, s.Set(ctx, tc.key, []byte(v)))
				got, err := s.Get(ctx, tc.key)
				require.NoError(t, err)
				require.Equal(t, v, string(got))
			}
		})
	}
}

func testGetWaitsForSet(t *testing.T, h Harness) {
	c := h.NewClients(t, 2)
	ctx := testCtx(t)
	type result struct {
		v   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		v, err := c[0].Get(ctx, "later")
		got <- result{v, err}
	}()
	ok, err := c[1].Check(ctx, "later")
	require.NoError(t, err)
	require.False(t, ok)
	select {
	case r := <-got:
		t.Fatalf("Get returned before the key was set: %q, %v", r.v, r.err)
	default:
	}
	require.NoError(t, c[1].Set(ctx, "later", []byte("value")))
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, "value", string(r.v))
}

func requireTimeout(t *testing.T, err error, cause error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, cause)
}

func testGetTimeout(t *testing.T, h Harness) {
	s := one(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	start := time.Now()
	_, err := s.Get(ctx, "never")
	requireTimeout(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), promptly, "Get must return once its deadline passes")
}

func testGetCanceled(t *testing.T, h Harness) {
	s := one(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "never")
		errc <- err
	}()
	cancel()
	requireTimeout(t, <-errc, context.Canceled)
}

func testWait(t *testing.T, h Harness) {
	c := h.NewClients(t, 2)
	ctx := testCtx(t)
	require.NoError(t, c[0].Wait(ctx), "waiting for no keys returns at once")
	keys := []string{"w/a", "w/b", "w/c"}
	errc := make(chan error, 1)
	go func() { errc <- c[0].Wait(ctx, keys...) }()
	for i := len(keys) - 1; i >= 0; i-- {
		select {
		case err := <-errc:
			t.Fatalf("Wait returned with %d keys still missing: %v", i+1, err)
		default:
		}
		require.NoError(t, c[1].Set(ctx, keys[i], []byte{byte(i)}))
	}
	require.NoError(t, <-errc)
}

func testWaitTimeout(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	require.NoError(t, s.Set(ctx, "present", []byte("x")))
	wctx, cancel := context.WithTimeout(ctx, shortWait)
	defer cancel()
	start := time.Now()
	err := s.Wait(wctx, "present", "absent")
	requireTimeout(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), promptly)
}

func testCheck(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	require.NoError(t, s.Set(ctx, "c/1", []byte("1")))
	require.NoError(t, s.Set(ctx, "c/2", nil))
	tests := []struct {
		name string
		keys []string
		want bool
	}{
		{"no keys", nil, true},
		{"one set", []string{"c/1"}, true},
		{"empty value counts as set", []string{"c/2"}, true},
		{"all set", []string{"c/1", "c/2"}, true},
		{"missing", []string{"c/3"}, false},
		{"some missing", []string{"c/1", "c/3", "c/2"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := s.Check(ctx, tc.keys...)
			require.NoError(t, err)
			require.Equal(t, tc.want, ok)
		})
	}
}

func testDelete(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	require.NoError(t, s.Set(ctx, "d", []byte("x")))
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{"existing", "d", true},
		{"just deleted", "d", false},
		{"never set", "nothing", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			existed, err := s.Delete(ctx, tc.key)
			require.NoError(t, err)
			require.Equal(t, tc.want, existed)
			ok, err := s.Check(ctx, tc.key)
			require.NoError(t, err)
			require.False(t, ok)
		})
	}
	require.NoError(t, s.Set(ctx, "d", []byte("again")))
	got, err := s.Get(ctx, "d")
	require.NoError(t, err)
	require.Equal(t, "again", string(got))
}

func testAdd(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	require.NoError(t, s.Set(ctx, "text", []byte("not a number")))
	require.NoError(t, s.Set(ctx, "preset", []byte("40")))
	tests := []struct {
		name  string
		key   string
		delta int64
		want  int64
	}{
		{"missing counts as zero", "n", 5, 5},
		{"adds", "n", 3, 8},
		{"negative", "n", -10, -2},
		{"zero reads", "n", 0, -2},
		{"preset decimal", "preset", 2, 42},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Add(ctx, tc.key, tc.delta)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			v, err := s.Get(ctx, tc.key)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint(tc.want), string(v), "counters are stored as decimal text")
		})
	}
	t.Run("not a counter", func(t *testing.T) {
		_, err := s.Add(ctx, "text", 1)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
	})
}

func testAddConcurrent(t *testing.T, h Harness) {
	const clients, adds = 4, 25
	c := h.NewClients(t, clients)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	seen := make([][]int64, clients)
	errs := make([]error, clients)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				n, err := c[i].Add(ctx, "sum", 1)
				if err != nil {
					errs[i] = err
					return
				}
				seen[i] = append(seen[i], n)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	total, err := c[0].Add(ctx, "sum", 0)
	require.NoError(t, err)
	require.Equal(t, int64(clients*adds), total)
	// Every Add saw a distinct intermediate value: none was lost.
	distinct := make(map[int64]bool)
	for _, s := range seen {
		for _, n := range s {
			require.False(t, distinct[n], "two Adds returned %d", n)
			distinct[n] = true
		}
	}
	require.Len(t, distinct, clients*adds)
}

func testCompareAndSet(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	tests := []struct {
		name              string
		key               string
		expected, desired string
		want              string
	}{
		{"missing key with empty expected sets", "cas", "", "v1", "v1"},
		{"mismatch returns current value", "cas", "wrong", "v2", "v1"},
		{"match sets", "cas", "v1", "v2", "v2"},
		{"missing key with non-empty expected does not set", "cas-missing", "x", "v", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.CompareAndSet(ctx, tc.key, []byte(tc.expected), []byte(tc.desired))
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			if tc.want != "" {
				v, err := s.Get(ctx, tc.key)
				require.NoError(t, err)
				require.Equal(t, tc.want, string(v))
			} else {
				ok, err := s.Check(ctx, tc.key)
				require.NoError(t, err)
				require.False(t, ok)
			}
		})
	}
}

func testCompareAndSetConcurrent(t *testing.T, h Harness) {
	const clients, incs = 4, 10
	c := h.NewClients(t, clients)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each client appends its own letter, so a swap that returns
			// exactly what this client asked for was this client's.
			var cur []byte
			for done := 0; done < incs; {
				next := append(bytes.Clone(cur), byte('a'+i))
				got, err := c[i].CompareAndSet(ctx, "cas-counter", cur, next)
				if err != nil {
					errs[i] = err
					return
				}
				if bytes.Equal(got, next) {
					done++
				}
				cur = got
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	v, err := c[0].Get(ctx, "cas-counter")
	require.NoError(t, err)
	// Every successful swap appended one letter; none was lost.
	require.Len(t, v, clients*incs)
	for i := range clients {
		require.Equal(t, incs, bytes.Count(v, []byte{byte('a' + i)}), "swaps of client %d", i)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func testLargeValue(t *testing.T, h Harness) {
	c := h.NewClients(t, 2)
	ctx := testCtx(t)
	v := randomBytes(t, 1<<20)
	require.NoError(t, c[0].Set(ctx, "large", v))
	got, err := c[1].Get(ctx, "large")
	require.NoError(t, err)
	require.True(t, bytes.Equal(v, got), "1 MiB value differs after a round trip")
}

func testBinaryKeysAndValues(t *testing.T, h Harness) {
	c := h.NewClients(t, 2)
	ctx := testCtx(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	tests := []struct {
		name  string
		key   string
		value []byte
	}{
		{"empty key", "", []byte("empty")},
		{"nul bytes", "a\x00b", []byte{0, 0, 0}},
		{"slashes and dots", "../../etc/passwd", []byte("no escape")},
		{"dot", ".", []byte("dot")},
		{"lock-like name", ".lock", []byte("not the lock")},
		{"unicode", "ключ/鍵/🔑", []byte("unicode")},
		{"all bytes key", string(all), all},
		{"long key", strings.Repeat("long/", 400), []byte("long")},
		{"invalid utf-8", "\xff\xfe\xfd", []byte{0xff}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, c[0].Set(ctx, tc.key, tc.value))
			got, err := c[1].Get(ctx, tc.key)
			require.NoError(t, err)
			require.Equal(t, tc.value, got)
		})
	}
	// Keys that differ only in bytes a naive encoding would fold together
	// stay distinct.
	for _, tc := range tests {
		got, err := c[1].Get(ctx, tc.key)
		require.NoError(t, err)
		require.Equal(t, tc.value, got, "key %q", tc.key)
	}
}

func testValuesAreCopied(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	v := []byte("original")
	require.NoError(t, s.Set(ctx, "copy", v))
	v[0] = 'X'
	got, err := s.Get(ctx, "copy")
	require.NoError(t, err)
	require.Equal(t, "original", string(got), "Set must not keep the caller's slice")
	got[0] = 'Y'
	again, err := s.Get(ctx, "copy")
	require.NoError(t, err)
	require.Equal(t, "original", string(again), "Get must not return the store's slice")
}

func testClientsSeeEachOther(t *testing.T, h Harness) {
	const n = 3
	c := h.NewClients(t, n)
	require.Len(t, c, n)
	ctx := testCtx(t)
	for i, s := range c {
		require.NoError(t, s.Set(ctx, fmt.Sprintf("peer/%d", i), []byte{byte(i)}))
	}
	for i, s := range c {
		for j := range n {
			v, err := s.Get(ctx, fmt.Sprintf("peer/%d", j))
			require.NoError(t, err, "client %d reading client %d's key", i, j)
			require.Equal(t, []byte{byte(j)}, v)
		}
	}
	_, err := c[2].Delete(ctx, "peer/0")
	require.NoError(t, err)
	ok, err := c[1].Check(ctx, "peer/0")
	require.NoError(t, err)
	require.False(t, ok, "a delete through one client is seen by another")
}

func testClose(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	require.NoError(t, s.Set(ctx, "k", []byte("v")))
	require.NoError(t, s.Close())
	calls := []struct {
		name string
		call func() error
	}{
		{"Set", func() error { return s.Set(ctx, "k", []byte("v")) }},
		{"Get", func() error { _, err := s.Get(ctx, "k"); return err }},
		{"Wait", func() error { return s.Wait(ctx, "k") }},
		{"Add", func() error { _, err := s.Add(ctx, "n", 1); return err }},
		{"CompareAndSet", func() error { _, err := s.CompareAndSet(ctx, "k", nil, nil); return err }},
		{"Check", func() error { _, err := s.Check(ctx, "k"); return err }},
		{"Delete", func() error { _, err := s.Delete(ctx, "k"); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.call(), backend.ErrClosed)
		})
	}
	require.NoError(t, s.Close(), "closing twice is harmless")
}

func testCloseWakesWaiters(t *testing.T, h Harness) {
	s, ctx := one(t, h), testCtx(t)
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		_, err := s.Get(ctx, "never")
		errc <- err
	}()
	<-started
	require.NoError(t, s.Close())
	select {
	case err := <-errc:
		// The Get either started after Close or was woken by it.
		require.ErrorIs(t, err, backend.ErrClosed)
	case <-ctx.Done():
		t.Fatal("a Get pending at Close did not return")
	}
}
