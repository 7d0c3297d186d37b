package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
	"github.com/intranode/intranode/symmetric/store/storetest"
)

func TestMemConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		m := store.NewMem()
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		clients := make([]store.Store, n)
		for i := range clients {
			clients[i] = m
		}
		return clients
	}))
}

func TestFileConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		dir := t.TempDir()
		clients := make([]store.Store, n)
		for i := range clients {
			f, err := store.NewFile(dir)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, f.Close()) })
			clients[i] = f
		}
		return clients
	}))
}

func TestTCPConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		return newTCPClients(t, n)
	}))
}

// newTCPClients starts a server on a free loopback port and connects n
// clients to it; all are closed when t ends.
func newTCPClients(t *testing.T, n int, opts ...store.Option) []store.Store {
	t.Helper()
	srv, err := store.ListenTCP("", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]store.Store, n)
	for i := range clients {
		c, err := store.DialTCP(ctx, srv.Addr(), opts...)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		clients[i] = c
	}
	return clients
}

func TestPrefixedConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		m := store.NewMem()
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		clients := make([]store.Store, n)
		for i := range clients {
			p, err := store.NewPrefixed(m, "job/")
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, p.Close()) })
			clients[i] = p
		}
		return clients
	}))
}

func TestPrefixedKeepsViewsApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := store.NewMem()
	defer m.Close()
	a, err := store.NewPrefixed(m, "host/a/")
	require.NoError(t, err)
	b, err := store.NewPrefixed(m, "host/b/")
	require.NoError(t, err)
	require.Equal(t, "host/a/", a.Prefix())
	require.Same(t, m, a.Unwrap())

	require.NoError(t, a.Set(ctx, "k", []byte("from a")))
	require.NoError(t, b.Set(ctx, "k", []byte("from b")))
	n, err := a.Add(ctx, "n", 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.Equal(t, []string{"host/a/k", "host/a/n"}, m.Keys("host/a/"))
	require.Equal(t, []string{"host/b/k"}, m.Keys("host/b/"))
	got, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "from b", string(got))
	ok, err := b.Check(ctx, "n")
	require.NoError(t, err)
	require.False(t, ok, "b does not see a's keys")

	// Closing a view leaves the store and the other views open.
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Set(ctx, "k", nil), backend.ErrClosed)
	require.NoError(t, b.Set(ctx, "k2", nil))
	require.NoError(t, m.Set(ctx, "direct", nil))
	require.NoError(t, b.Close())
}

// Two groups that run the same exchange prefix through views of one store
// do not read each other's rounds.
func TestPrefixedExchangesDoNotCollide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := store.NewMem()
	defer m.Close()
	const groups, world = 2, 3
	got := make([][][]byte, groups*world)
	errs := make([]error, groups*world)
	var wg sync.WaitGroup
	for g := range groups {
		view, err := store.NewPrefixed(m, fmt.Sprintf("host/%d/", g))
		require.NoError(t, err)
		defer view.Close()
		for r := range world {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ex, err := store.NewExchange(view, "handshake-0", r, world)
				if err != nil {
					errs[g*world+r] = err
					return
				}
				defer ex.Close(ctx)
				got[g*world+r], errs[g*world+r] = ex.AllGather(ctx, fmt.Appendf(nil, "g%d r%d", g, r))
			}()
		}
	}
	wg.Wait()
	for g := range groups {
		for r := range world {
			require.NoError(t, errs[g*world+r])
			for peer, v := range got[g*world+r] {
				require.Equal(t, fmt.Sprintf("g%d r%d", g, peer), string(v))
			}
		}
	}
}

func TestNewPrefixedNilStore(t *testing.T) {
	_, err := store.NewPrefixed(nil, "p/")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}
