package store_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
	"github.com/intranode/intranode/symmetric/store/storetest"
)

var memNames atomic.Int64

func openURL(t *testing.T, raw string, opts ...store.Option) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, raw, opts...)
	require.NoError(t, err, raw)
	return s
}

func TestOpenMemConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		raw := fmt.Sprintf("mem://conformance-%d", memNames.Add(1))
		clients := make([]store.Store, n)
		for i := range clients {
			clients[i] = openURL(t, raw)
			t.Cleanup(func() { require.NoError(t, clients[i].Close()) })
		}
		return clients
	}))
}

func TestOpenFileConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		raw := "file://" + t.TempDir()
		clients := make([]store.Store, n)
		for i := range clients {
			clients[i] = openURL(t, raw)
			t.Cleanup(func() { require.NoError(t, clients[i].Close()) })
		}
		return clients
	}))
}

// The first client serves, as rank 0 would; the others dial its address.
func TestOpenTCPServeConformance(t *testing.T) {
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		served, ok := openURL(t, "tcp://127.0.0.1:0?serve=1").(*store.ServedTCP)
		require.True(t, ok, "serve=1 returns a *ServedTCP")
		// Registered first, so it runs last: the server outlives its
		// clients.
		t.Cleanup(func() { require.NoError(t, served.Close()) })
		clients := []store.Store{served}
		for len(clients) < n {
			c := openURL(t, "tcp://"+served.Server.Addr())
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			clients = append(clients, c)
		}
		return clients
	}))
}

func TestOpenMemSharesByName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := fmt.Sprintf("mem://shared-%d", memNames.Add(1))
	a, b := openURL(t, raw), openURL(t, raw)
	require.NoError(t, a.Set(ctx, "k", []byte("v")))
	got, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))

	// Closing one handle leaves the store to the other.
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Set(ctx, "k", nil), backend.ErrClosed)
	got, err = b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))

	// Once the last handle closes, the name starts afresh.
	require.NoError(t, b.Close())
	c := openURL(t, raw)
	defer c.Close()
	ok, err := c.Check(ctx, "k")
	require.NoError(t, err)
	require.False(t, ok)

	// mem:// without a name is private.
	p, q := openURL(t, "mem://"), openURL(t, "mem://")
	defer p.Close()
	defer q.Close()
	require.NoError(t, p.Set(ctx, "k", nil))
	ok, err = q.Check(ctx, "k")
	require.NoError(t, err)
	require.False(t, ok)
}

func TestOpenRefusesBadURLs(t *testing.T) {
	tests := []struct {
		name, url string
		want      error
	}{
		{"no scheme", "/tmp/store", backend.ErrInvalidArgument},
		{"unparsable", "tcp://[::1", backend.ErrInvalidArgument},
		{"unknown scheme", "redis://host:6379", backend.ErrNotSupported},
		{"etcd without its package", "etcd://127.0.0.1:2379/job", backend.ErrNotSupported},
		{"mem with parameters", "mem://x?timeout=1s", backend.ErrInvalidArgument},
		{"mem with user", "mem://u@x", backend.ErrInvalidArgument},
		{"file on another host", "file://otherhost/tmp/x", backend.ErrInvalidArgument},
		{"file relative", "file:relative/dir", backend.ErrInvalidArgument},
		{"file with parameters", "file:///tmp/x?mode=1", backend.ErrInvalidArgument},
		{"tcp without port", "tcp://127.0.0.1", backend.ErrInvalidArgument},
		{"tcp with path", "tcp://127.0.0.1:1/job", backend.ErrInvalidArgument},
		{"tcp unknown parameter", "tcp://127.0.0.1:1?srve=1", backend.ErrInvalidArgument},
		{"tcp bad serve", "tcp://127.0.0.1:1?serve=maybe", backend.ErrInvalidArgument},
		{"tcp serve twice", "tcp://127.0.0.1:1?serve=1&serve=0", backend.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := store.Open(ctx, tc.url)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, s)
		})
	}
	t.Run("etcd hint", func(t *testing.T) {
		_, err := store.Open(context.Background(), "etcd://127.0.0.1:2379/job")
		require.ErrorContains(t, err, "symmetric/store/etcdstore")
	})
	t.Run("password redacted", func(t *testing.T) {
		_, err := store.Open(context.Background(), "mem://user:hunter2@x")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "hunter2")
	})
}

// OpenPrefixed keeps runs that share one store apart, and its Close
// releases the store it opened.
func TestOpenPrefixed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := fmt.Sprintf("mem://prefixed-%d", memNames.Add(1))
	a1, err := store.OpenPrefixed(ctx, raw, "run/1/")
	require.NoError(t, err)
	a2, err := store.OpenPrefixed(ctx, raw, "run/1/")
	require.NoError(t, err)
	b, err := store.OpenPrefixed(ctx, raw, "run/2/")
	require.NoError(t, err)
	require.Equal(t, "run/1/", a1.Prefix())

	require.NoError(t, a1.Set(ctx, "k", []byte("run 1")))
	got, err := a2.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "run 1", string(got), "one prefix, one run")
	ok, err := b.Check(ctx, "k")
	require.NoError(t, err)
	require.False(t, ok, "another prefix sees nothing of it")

	// Each view holds a handle of the named store: once all are closed,
	// the name starts afresh.
	for _, v := range []*store.Prefixed{a1, a2, b} {
		require.NoError(t, v.Close())
	}
	require.ErrorIs(t, a1.Set(ctx, "k", nil), backend.ErrClosed)
	c, err := store.OpenPrefixed(ctx, raw, "run/1/")
	require.NoError(t, err)
	defer c.Close()
	ok, err = c.Check(ctx, "k")
	require.NoError(t, err)
	require.False(t, ok)

	_, err = store.OpenPrefixed(ctx, "redis://host:6379", "run/1/")
	require.ErrorIs(t, err, backend.ErrNotSupported)
}

func TestCheckSharedURL(t *testing.T) {
	tests := []struct {
		name      string
		url       string
		processes bool
		want      string // "" when allowed
	}{
		{"tcp", "tcp://127.0.0.1:1234", true, ""},
		{"file", "file:///tmp/store", true, ""},
		{"etcd", "etcd://127.0.0.1:2379/job", true, ""},
		{"unknown scheme is Open's to refuse", "redis://host:6379", true, ""},
		{"named mem, goroutines", "mem://job", false, ""},
		{"opaque mem, goroutines", "mem:job", false, ""},
		{"tcp serve", "tcp://127.0.0.1:0?serve=1", false, "cannot each serve"},
		{"tcp serve=0 dials", "tcp://127.0.0.1:1?serve=0", true, ""},
		{"etcd with parameters", "etcd://127.0.0.1:2379/job?ttl=5s&tls=1", false, ""},
		{"etcd member", "etcd://127.0.0.1:2379/job?member=rank0", true, "every rank would claim it"},
		{"unnamed mem", "mem://", false, "unnamed"},
		{"mem, processes", "mem://job", true, "one process"},
		{"unparsable", "tcp://[::1", false, "parse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := store.CheckSharedURL(tc.url, tc.processes)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestOpenTCPUnreachable(t *testing.T) {
	srv, err := store.ListenTCP("")
	require.NoError(t, err)
	addr := srv.Addr()
	require.NoError(t, srv.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = store.Open(ctx, "tcp://"+addr)
	require.ErrorIs(t, err, backend.ErrUnavailable)
}

// testScheme is registered once for the whole test binary, as a store
// package's init function would.
var testSchemeCalls = make(chan *url.URL, 1)

func init() {
	store.RegisterScheme("Test-Scheme", func(ctx context.Context, u *url.URL, opts ...store.Option) (store.Store, error) {
		if err := store.CheckQuery(u, "x"); err != nil {
			return nil, err
		}
		testSchemeCalls <- u
		return store.NewMem(opts...), nil
	})
}

func TestRegisterScheme(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Contains(t, store.Schemes(), "test-scheme", "schemes are lower case")
	require.Subset(t, store.Schemes(), []string{"file", "mem", "tcp"})

	s, err := store.Open(ctx, "TEST-SCHEME://host:1/some/path?x=1", store.WithTimeout(time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	u := <-testSchemeCalls
	require.Equal(t, "host:1", u.Host)
	require.Equal(t, "/some/path", u.Path)
	// The options reached the store: its Get times out at once.
	_, err = s.Get(context.Background(), "never")
	require.ErrorIs(t, err, backend.ErrTimeout)

	_, err = store.Open(ctx, "test-scheme://host:1?y=1")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, `unknown parameter "y"`)

	tests := []struct {
		name   string
		scheme string
		open   store.OpenFunc
	}{
		{"twice", "test-scheme", func(context.Context, *url.URL, ...store.Option) (store.Store, error) { return nil, nil }},
		{"built in", "tcp", func(context.Context, *url.URL, ...store.Option) (store.Store, error) { return nil, nil }},
		{"empty", "", func(context.Context, *url.URL, ...store.Option) (store.Store, error) { return nil, nil }},
		{"nil", "other", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Panics(t, func() { store.RegisterScheme(tc.scheme, tc.open) })
		})
	}
}

func TestResolve(t *testing.T) {
	def := store.Resolve()
	require.Equal(t, store.DefaultTimeout, def.Timeout)
	require.NotNil(t, def.Logger)
	require.Equal(t, store.DefaultMaxKeys, def.MaxKeys)
	got := store.Resolve(store.WithTimeout(time.Second), store.WithMaxKeys(7))
	require.Equal(t, time.Second, got.Timeout)
	require.Equal(t, 7, got.MaxKeys)
}
