package ncclboot

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

// exchanger is an in-process all-gather among world goroutines, as the
// NCCL communicator's is: every rank's call of round k meets the others'.
type exchanger struct {
	mu     sync.Mutex
	cond   *sync.Cond
	world  int
	rounds map[int][][]byte
	done   map[int]int
}

func newExchanger(world int) *exchanger {
	e := &exchanger{world: world, rounds: map[int][][]byte{}, done: map[int]int{}}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// gather returns rank's all-gather function, counting its rounds.
func (e *exchanger) gather(rank int) allGatherFunc {
	round := 0
	return func(ctx context.Context, mine []byte) ([][]byte, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		k := round
		round++
		if e.rounds[k] == nil {
			e.rounds[k] = make([][]byte, e.world)
		}
		e.rounds[k][rank] = append([]byte(nil), mine...)
		e.done[k]++
		e.cond.Broadcast()
		for e.done[k] < e.world {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.cond.Wait()
		}
		return e.rounds[k], nil
	}
}

// ranks runs rank for every rank of world as goroutines, each with its
// gather store over one exchanger, and returns the exchanger and every
// rank's result.
func ranks(t *testing.T, world int, rank func(ctx context.Context, r int, gs *gatherStore) bool) (*exchanger, []bool) {
	t.Helper()
	e := newExchanger(world)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok := make([]bool, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { ok[r] = rank(ctx, r, newGatherStore(world, e.gather(r))) })
	}
	wg.Wait()
	return e, ok
}

// TestGatherStoreExchange: ranks that exchange keys meet in one round per
// exchange and agree on success.
func TestGatherStoreExchange(t *testing.T) {
	const world = 3
	e, ok := ranks(t, world, func(ctx context.Context, r int, gs *gatherStore) bool {
		for round := range 3 {
			require.NoError(t, gs.Set(ctx, fmt.Sprintf("x/%d/%d", round, r), []byte{byte(r)}))
			for q := range world {
				v, err := gs.Get(ctx, fmt.Sprintf("x/%d/%d", round, q))
				require.NoError(t, err)
				require.Equal(t, []byte{byte(q)}, v)
			}
		}
		n, err := gs.Add(ctx, "mine", 2)
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "counters are local")
		formed, ferr := gs.finish(ctx, true)
		require.NoError(t, ferr)
		_, err = gs.Get(ctx, "never")
		require.ErrorIs(t, err, backend.ErrClosed, "sealed: no more rounds")
		return formed
	})
	require.Equal(t, []bool{true, true, true}, ok)
	require.Len(t, e.rounds, 4, "three exchanges and the verdict")
}

// TestGatherStoreOneRankFails: a rank that gives up while the others still
// exchange ends the bootstrap for all of them in that same round; nobody
// waits for a round no one else makes, and every rank learns it failed.
func TestGatherStoreOneRankFails(t *testing.T) {
	const world, failing = 4, 2
	e, ok := ranks(t, world, func(ctx context.Context, r int, gs *gatherStore) bool {
		if r == failing {
			formed, err := gs.finish(ctx, false)
			require.NoError(t, err)
			return formed
		}
		require.NoError(t, gs.Set(ctx, fmt.Sprintf("k/%d", r), nil))
		_, err := gs.Get(ctx, fmt.Sprintf("k/%d", (r+1)%world))
		require.ErrorIs(t, err, backend.ErrPeerFailed)
		require.ErrorContains(t, err, fmt.Sprintf("ranks [%d]", failing))
		formed, err := gs.finish(ctx, true)
		require.NoError(t, err)
		return formed
	})
	require.Equal(t, []bool{false, false, false, false}, ok)
	require.Len(t, e.rounds, 1, "the failing rank's verdict and the others' keys met in one round")
}

// TestGatherStoreLostRound: once an all-gather fails (here a peer never
// makes its call and the wait ends at the deadline), the NCCL
// communicator's call sequence is unknown: the store reports
// ErrSequenceLost from then on and runs no other all-gather, not even the
// verdict's round.
func TestGatherStoreLostRound(t *testing.T) {
	calls := 0
	gs := newGatherStore(2, func(ctx context.Context, _ []byte) ([][]byte, error) {
		calls++
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, gs.Set(ctx, "k/0", nil))
	_, err := gs.Get(ctx, "k/1")
	require.ErrorIs(t, err, ErrSequenceLost)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, backend.CodeTimeout, backend.CodeOf(err), "a timeout, for NCCL's ncclRemoteError and the C interface's intranodeTimeout")
	later, cancelLater := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelLater()
	_, err = gs.Get(later, "k/1")
	require.ErrorIs(t, err, ErrSequenceLost)
	formed, err := gs.finish(later, false)
	require.False(t, formed)
	require.ErrorIs(t, err, ErrSequenceLost)
	require.Equal(t, 1, calls, "no all-gather after the one that failed")
}
