package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
