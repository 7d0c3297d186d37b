//go:build linux

package symmetric

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	_ "github.com/intranode/intranode/kernels/cpu" // the fake backend's kernels
	"github.com/intranode/intranode/symmetric/store"
)

// TestConfirmDoesNotWaitBehindABarrier: rank 0's Barrier holds the
// memory's signal lock until rank 1 joins it, and rank 1 joins only once
// rank 0's Confirm has returned; so Confirm must enqueue without that
// lock, or the Barrier runs out its deadline and the test fails.
func TestConfirmDoesNotWaitBehindABarrier(t *testing.T) {
	b, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st := store.NewMem()
	t.Cleanup(func() { st.Close() })
	const world = 2
	mems := make([]*Memory, world)
	streams := make([]backend.Stream, world)
	status := make([]backend.HostAllocation, world)
	open := func(r int) error {
		dev, err := b.Open(ctx, r)
		if err != nil {
			return err
		}
		t.Cleanup(func() { dev.Close() })
		blk, err := Alloc(ctx, b, dev, 4096)
		if err != nil {
			return err
		}
		if mems[r], err = blk.Rendezvous(ctx, "confirm", GroupInfo{Rank: r, World: world, Store: st}); err != nil {
			return err
		}
		t.Cleanup(func() { mems[r].Close() })
		if streams[r], err = dev.NewStream(ctx); err != nil {
			return err
		}
		t.Cleanup(func() { streams[r].Close() })
		status[r], err = dev.AllocHost(ctx, 64)
		if err == nil {
			t.Cleanup(func() { status[r].Close() })
		}
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		wg.Go(func() { errs[r] = open(r) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	barrier := make(chan error, 1)
	go func() { barrier <- mems[0].Barrier(bctx, 0) }()
	for mems[0].mu.TryLock() { // until the Barrier holds it
		mems[0].mu.Unlock()
		require.NoError(t, ctx.Err())
		runtime.Gosched()
	}
	require.NoError(t, mems[0].Confirm(ctx, streams[0], status[0].Ptr(), uint64(10*time.Second)))
	require.NoError(t, mems[1].Barrier(ctx, 0))
	require.NoError(t, <-barrier, "rank 0's barrier")
	require.NoError(t, mems[1].Confirm(ctx, streams[1], status[1].Ptr(), uint64(10*time.Second)))
	for r := range world {
		require.NoError(t, streams[r].Synchronize(ctx))
		require.Zero(t, TakeStatus(status[r].Bytes()), "rank %d's confirmation", r)
	}
}
