package connectivity

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// peerHost answers peer-access queries from a fixed table and counts every
// call, so tests can check what the cache asks and when.
type peerHost struct {
	mu        sync.Mutex
	access    [][]bool
	queries   map[[2]int]int
	enables   map[[2]int]int
	queryErr  map[[2]int]error // returned (once) instead of an answer
	enableErr map[[2]int]error // returned (once) by enable
}

func newPeerHost(access [][]bool) *peerHost {
	return &peerHost{
		access:    access,
		queries:   map[[2]int]int{},
		enables:   map[[2]int]int{},
		queryErr:  map[[2]int]error{},
		enableErr: map[[2]int]error{},
	}
}

func (h *peerHost) query(i, j int) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queries[[2]int{i, j}]++
	if err, ok := h.queryErr[[2]int{i, j}]; ok {
		delete(h.queryErr, [2]int{i, j})
		return false, err
	}
	return h.access[i][j], nil
}

func (h *peerHost) enable(i, j int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enables[[2]int{i, j}]++
	if err, ok := h.enableErr[[2]int{i, j}]; ok {
		delete(h.enableErr, [2]int{i, j})
		return err
	}
	return nil
}

func (h *peerHost) counts() (queries, enables map[[2]int]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q, e := map[[2]int]int{}, map[[2]int]int{}
	for k, v := range h.queries {
		q[k] = v
	}
	for k, v := range h.enables {
		e[k] = v
	}
	return q, e
}

// threeGPUs: 0 and 1 see each other, 2 sees nobody and nobody sees 2.
func threeGPUs() [][]bool {
	return [][]bool{
		{true, true, false},
		{true, true, false},
		{false, false, true},
	}
}

func TestPeerCacheQueriesEachPairOnce(t *testing.T) {
	h := newPeerHost(threeGPUs())
	c := NewPeerCache(3, h.query, h.enable)
	for round := range 3 {
		for i := range 3 {
			for j := range 3 {
				got, err := c.Get(i, j)
				require.NoError(t, err)
				require.Equal(t, h.access[i][j], got, "round %d pair (%d,%d)", round, i, j)
			}
		}
	}
	queries, enables := h.counts()
	require.Equal(t, map[[2]int]int{
		{0, 1}: 1, {0, 2}: 1, {1, 0}: 1, {1, 2}: 1, {2, 0}: 1, {2, 1}: 1,
	}, queries, "every off-diagonal pair queried exactly once, the diagonal never")
	require.Equal(t, map[[2]int]int{{0, 1}: 1, {1, 0}: 1}, enables, "enabled once per yes, never on no")
	require.Equal(t, [][]Access{
		{AccessYes, AccessYes, AccessNo},
		{AccessYes, AccessYes, AccessNo},
		{AccessNo, AccessNo, AccessYes},
	}, c.Snapshot())
}

func TestPeerCacheDiagonal(t *testing.T) {
	h := newPeerHost([][]bool{{false, false}, {false, false}})
	c := NewPeerCache(2, h.query, h.enable)
	for i := range 2 {
		require.Equal(t, AccessYes, c.State(i, i))
		got, err := c.Get(i, i)
		require.NoError(t, err)
		require.True(t, got, "a device always accesses itself")
	}
	queries, enables := h.counts()
	require.Empty(t, queries)
	require.Empty(t, enables)
}

func TestPeerCacheLazyStates(t *testing.T) {
	h := newPeerHost(threeGPUs())
	c := NewPeerCache(3, h.query, h.enable)
	require.Equal(t, AccessUnknown, c.State(0, 1))
	require.Equal(t, AccessUnknown, c.State(2, 0))
	_, err := c.Get(0, 1)
	require.NoError(t, err)
	_, err = c.Get(2, 0)
	require.NoError(t, err)
	require.Equal(t, AccessYes, c.State(0, 1))
	require.Equal(t, AccessUnknown, c.State(1, 0), "(0,1) says nothing about (1,0)")
	require.Equal(t, AccessNo, c.State(2, 0))
	require.Equal(t, AccessUnknown, c.State(5, 0), "out of range reads as unknown")
}

func TestPeerCacheNilEnable(t *testing.T) {
	h := newPeerHost(threeGPUs())
	c := NewPeerCache(3, h.query, nil)
	got, err := c.Get(1, 0)
	require.NoError(t, err)
	require.True(t, got)
}

func TestPeerCacheErrorsAreNotCached(t *testing.T) {
	errDriver := errors.New("driver busy")
	tests := []struct {
		name        string
		queryErr    bool
		enableErr   bool
		wantQueries int
		wantEnables int
	}{
		{name: "query error", queryErr: true, wantQueries: 2, wantEnables: 1},
		{name: "enable error", enableErr: true, wantQueries: 2, wantEnables: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newPeerHost(threeGPUs())
			if tc.queryErr {
				h.queryErr[[2]int{0, 1}] = errDriver
			}
			if tc.enableErr {
				h.enableErr[[2]int{0, 1}] = errDriver
			}
			c := NewPeerCache(3, h.query, h.enable)

			got, err := c.Get(0, 1)
			require.ErrorIs(t, err, errDriver)
			require.False(t, got)
			require.Equal(t, AccessUnknown, c.State(0, 1))

			got, err = c.Get(0, 1)
			require.NoError(t, err)
			require.True(t, got)
			got, err = c.Get(0, 1)
			require.NoError(t, err)
			require.True(t, got)

			queries, enables := h.counts()
			require.Equal(t, tc.wantQueries, queries[[2]int{0, 1}])
			require.Equal(t, tc.wantEnables, enables[[2]int{0, 1}])
		})
	}
}

func TestPeerCacheOutOfRange(t *testing.T) {
	h := newPeerHost(threeGPUs())
	c := NewPeerCache(3, h.query, h.enable)
	for _, p := range [][2]int{{-1, 0}, {0, -1}, {3, 0}, {0, 3}} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			_, err := c.Get(p[0], p[1])
			require.ErrorContains(t, err, "out of range")
		})
	}
	queries, _ := h.counts()
	require.Empty(t, queries)
}

func TestPeerCacheConcurrentGet(t *testing.T) {
	const n = MaxDevices
	access := make([][]bool, n)
	for i := range access {
		access[i] = make([]bool, n)
		for j := range access[i] {
			access[i][j] = (i+j)%3 != 0 || i == j
		}
	}
	h := newPeerHost(access)
	c := NewPeerCache(n, h.query, h.enable)

	const goroutines = 16
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range n * n {
				// Each goroutine walks the pairs from a different start so
				// they collide on first queries.
				p := (k + g*7) % (n * n)
				i, j := p/n, p%n
				got, err := c.Get(i, j)
				if err != nil {
					errs <- err
					return
				}
				if got != access[i][j] {
					errs <- fmt.Errorf("pair (%d,%d): got %v, want %v", i, j, got, access[i][j])
					return
				}
				_ = c.State(j, i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	queries, enables := h.counts()
	require.Len(t, queries, n*(n-1))
	for pair, calls := range queries {
		require.Equal(t, 1, calls, "pair %v queried once", pair)
		if access[pair[0]][pair[1]] {
			require.Equal(t, 1, enables[pair], "pair %v enabled once", pair)
		} else {
			require.Zero(t, enables[pair], "pair %v never enabled", pair)
		}
	}
}
