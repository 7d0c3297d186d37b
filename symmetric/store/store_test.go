package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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

// exchangeStore is a store under test for Exchange: clients for the ranks
// and a way to list the keys it holds.
type exchangeStore struct {
	name string
	make func(t *testing.T, world int) (clients []store.Store, keys func(prefix string) []string)
}

var exchangeStores = []exchangeStore{
	{"mem", func(t *testing.T, world int) ([]store.Store, func(string) []string) {
		m := store.NewMem()
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		clients := make([]store.Store, world)
		for i := range clients {
			clients[i] = m
		}
		return clients, m.Keys
	}},
	{"tcp", func(t *testing.T, world int) ([]store.Store, func(string) []string) {
		srv, err := store.ListenTCP("")
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close()) })
		clients := make([]store.Store, world)
		for i := range clients {
			c, err := store.DialTCP(context.Background(), srv.Addr())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			clients[i] = c
		}
		return clients, srv.Keys
	}},
}

// runRanks runs fn for every rank of a group on its own goroutine and
// returns the ranks' errors, indexed by rank. Ranks not in ranks (when
// given) stay away.
func runRanks(t *testing.T, clients []store.Store, prefix string, ranks []int, fn func(ex *store.Exchange) error) []error {
	t.Helper()
	world := len(clients)
	if ranks == nil {
		for r := range world {
			ranks = append(ranks, r)
		}
	}
	errs := make([]error, world)
	var wg sync.WaitGroup
	for _, r := range ranks {
		ex, err := store.NewExchange(clients[r], prefix, r, world)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(ex)
		}()
	}
	wg.Wait()
	return errs
}

type rankInfo struct {
	Rank   int32
	Device uint32
	Host   [16]byte
	Ready  bool
}

func TestExchangeCollectives(t *testing.T) {
	for _, st := range exchangeStores {
		for _, world := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s/world=%d", st.name, world), func(t *testing.T) {
				clients, keys := st.make(t, world)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				errs := runRanks(t, clients, "coll", nil, func(ex *store.Exchange) error {
					r := ex.Rank()
					for round := range 3 {
						all, err := ex.AllGather(ctx, fmt.Appendf(nil, "rank %d round %d", r, round))
						if err != nil {
							return err
						}
						for peer, v := range all {
							if want := fmt.Sprintf("rank %d round %d", peer, round); string(v) != want {
								return fmt.Errorf("all-gather: rank %d's value is %q, want %q", peer, v, want)
							}
						}
						if err := ex.Barrier(ctx); err != nil {
							return err
						}
						root := round % world
						got, err := ex.Broadcast(ctx, root, fmt.Appendf(nil, "from %d", r))
						if err != nil {
							return err
						}
						if want := fmt.Sprintf("from %d", root); string(got) != want {
							return fmt.Errorf("broadcast: got %q, want %q", got, want)
						}
						info := rankInfo{Rank: int32(r), Device: uint32(world - r), Ready: r%2 == 0}
						copy(info.Host[:], "node-1")
						infos, err := store.AllGatherValue(ctx, ex, info)
						if err != nil {
							return err
						}
						for peer, in := range infos {
							want := rankInfo{Rank: int32(peer), Device: uint32(world - peer), Ready: peer%2 == 0}
							copy(want.Host[:], "node-1")
							if in != want {
								return fmt.Errorf("all-gather value: rank %d sent %+v, want %+v", peer, in, want)
							}
						}
					}
					return ex.Close(ctx)
				})
				require.NoError(t, errors.Join(errs...))
				require.Empty(t, keys("coll/"), "closing every rank leaves no keys behind")
			})
		}
	}
}

func TestExchangeManyRounds(t *testing.T) {
	const rounds = 1000
	for _, st := range exchangeStores {
		for _, world := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s/world=%d", st.name, world), func(t *testing.T) {
				clients, keys := st.make(t, world)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				exs := make([]*store.Exchange, world)
				errs := runRanks(t, clients, "many", nil, func(ex *store.Exchange) error {
					exs[ex.Rank()] = ex
					r := ex.Rank()
					for round := range rounds {
						// Rank- and round-specific values of varying length: a
						// stale read from any earlier round cannot match.
						payload := bytes.Repeat(fmt.Appendf(nil, "%d:%d;", r, round), 1+(r+round)%3)
						all, err := ex.AllGather(ctx, payload)
						if err != nil {
							return err
						}
						for peer, v := range all {
							want := bytes.Repeat(fmt.Appendf(nil, "%d:%d;", peer, round), 1+(peer+round)%3)
							if !bytes.Equal(v, want) {
								return fmt.Errorf("round %d: rank %d's value is %q, want %q", round, peer, v, want)
							}
						}
					}
					return nil
				})
				require.NoError(t, errors.Join(errs...))
				require.LessOrEqual(t, len(keys("many/")), world, "finished rounds must be deleted: %v", keys("many/"))
				for _, ex := range exs {
					require.NoError(t, ex.Close(ctx))
				}
				require.Empty(t, keys("many/"))
			})
		}
	}
}

func TestExchangeMissingRank(t *testing.T) {
	tests := []struct {
		name    string
		world   int
		present []int
		want    map[int]string // rank -> what its error names
	}{
		{"one missing", 3, []int{0, 2}, map[int]string{
			0: `store exchange "miss" seq 0: rank 1 did not arrive`,
			2: `store exchange "miss" seq 0: rank 1 did not arrive`,
		}},
		{"two missing", 4, []int{0, 2}, map[int]string{
			0: `store exchange "miss" seq 0: ranks 1, 3 did not arrive`,
			2: `store exchange "miss" seq 0: ranks 1, 3 did not arrive`,
		}},
	}
	for _, st := range exchangeStores {
		for _, tc := range tests {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				clients, _ := st.make(t, tc.world)
				start := time.Now()
				errs := runRanks(t, clients, "miss", tc.present, func(ex *store.Exchange) error {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					defer cancel()
					_, err := ex.AllGather(ctx, []byte("x"))
					return err
				})
				require.Less(t, time.Since(start), 20*time.Second, "ranks must give up at their deadline")
				for _, r := range tc.present {
					require.ErrorIs(t, errs[r], backend.ErrTimeout, "rank %d", r)
					require.ErrorIs(t, errs[r], context.DeadlineExceeded, "rank %d", r)
					require.ErrorContains(t, errs[r], tc.want[r], "rank %d", r)
					t.Logf("rank %d: %v", r, errs[r])
				}
			})
		}
	}
}

func TestExchangeLaterRoundsAfterSlowRank(t *testing.T) {
	// A rank that arrives late to a round is still served that round's
	// values, not a later one's.
	m := store.NewMem()
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gate := make(chan struct{})
	errs := runRanks(t, []store.Store{m, m}, "slow", nil, func(ex *store.Exchange) error {
		if ex.Rank() == 1 {
			<-gate
		} else {
			close(gate)
		}
		for round := range 20 {
			v, err := ex.Broadcast(ctx, round%2, []byte{byte(round)})
			if err != nil {
				return err
			}
			if !bytes.Equal(v, []byte{byte(round)}) {
				return fmt.Errorf("round %d: got %v", round, v)
			}
		}
		return nil
	})
	require.NoError(t, errors.Join(errs...))
}

func TestNewExchangeErrors(t *testing.T) {
	m := store.NewMem()
	defer m.Close()
	tests := []struct {
		name        string
		s           store.Store
		prefix      string
		rank, world int
	}{
		{"nil store", nil, "p", 0, 1},
		{"empty prefix", m, "", 0, 1},
		{"no ranks", m, "p", 0, 0},
		{"negative rank", m, "p", -1, 2},
		{"rank past world", m, "p", 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.NewExchange(tc.s, tc.prefix, tc.rank, tc.world)
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
		})
	}
}

func TestExchangeArgumentErrors(t *testing.T) {
	m := store.NewMem()
	defer m.Close()
	ctx := context.Background()
	ex, err := store.NewExchange(m, "args", 0, 1)
	require.NoError(t, err)
	calls := []struct {
		name string
		call func() error
		want error
	}{
		{"broadcast root too big", func() error { _, err := ex.Broadcast(ctx, 1, nil); return err }, backend.ErrInvalidArgument},
		{"broadcast root negative", func() error { _, err := ex.Broadcast(ctx, -1, nil); return err }, backend.ErrInvalidArgument},
		{"value slice", func() error { _, err := store.AllGatherValue(ctx, ex, []int32{1}); return err }, backend.ErrInvalidArgument},
		{"value string", func() error { _, err := store.AllGatherValue(ctx, ex, "s"); return err }, backend.ErrInvalidArgument},
		{"value int", func() error { _, err := store.AllGatherValue(ctx, ex, 1); return err }, backend.ErrInvalidArgument},
		{"value pointer", func() error { _, err := store.AllGatherValue(ctx, ex, &rankInfo{}); return err }, backend.ErrInvalidArgument},
		{"value struct with slice", func() error {
			_, err := store.AllGatherValue(ctx, ex, struct{ B []byte }{})
			return err
		}, backend.ErrInvalidArgument},
		{"value int64", func() error {
			v, err := store.AllGatherValue(ctx, ex, int64(-7))
			if err == nil && v[0] != -7 {
				err = fmt.Errorf("got %d", v[0])
			}
			return err
		}, nil},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if c.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.want)
		})
	}
	require.NoError(t, ex.Close(ctx))
	require.NoError(t, ex.Close(ctx), "closing twice is harmless")
	_, err = ex.AllGather(ctx, nil)
	require.ErrorIs(t, err, backend.ErrClosed)
	require.Zero(t, m.Len())
}

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

// A URL that parses but whose store fails to open gives a nil Store, not an
// interface holding a nil pointer: a caller that defers Close after a nil
// check alone must not panic. (require.Nil would accept a typed nil.)
func TestOpenFailureIsNilStore(t *testing.T) {
	srv, err := store.ListenTCP("")
	require.NoError(t, err)
	addr := srv.Addr()
	require.NoError(t, srv.Close())
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	for _, raw := range []string{
		"tcp://" + addr,
		"file://" + notDir,
		"file://" + filepath.Join(notDir, "below"),
	} {
		t.Run(raw, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := store.Open(ctx, raw)
			require.Error(t, err)
			require.True(t, s == nil, "store.Open returned %#v with its error", s)
		})
	}
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
