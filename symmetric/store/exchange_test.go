package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

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
