package collective_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// TestAbsentRankIsNamedByEverySurvivor: one rank of four never makes the
// call. Whichever path notices first on a survivor (the kernel's own
// timeout, the wait on the stream at the caller's deadline, a barrier),
// its error names the absent rank. A caller's deadline is also the
// kernels' timeout, so with one the stream wait and the kernel end at the
// same instant and either may report first; without one the comm's timeout
// bounds the kernels.
func TestAbsentRankIsNamedByEverySurvivor(t *testing.T) {
	const world, absent = 4, 3
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := fake.New(fake.WithDevices(world))
	require.NoError(t, err)
	defer b.Close()
	for _, tc := range []struct {
		name     string
		timeout  time.Duration // the comm's
		deadline time.Duration // the caller's
		algo     collective.Algo
		barrier  bool
	}{
		{"deadline equals timeout", time.Second, time.Second, collective.OneShot, false},
		{"deadline first", 5 * time.Second, 500 * time.Millisecond, collective.OneShot, false},
		{"deadline first, two-shot", 5 * time.Second, 500 * time.Millisecond, collective.TwoShot, false},
		{"deadline first, fallback", 5 * time.Second, 500 * time.Millisecond, collective.None, false},
		{"no deadline: the kernel's timeout", 500 * time.Millisecond, 0, collective.OneShot, false},
		{"no deadline, fallback", 500 * time.Millisecond, 0, collective.None, false},
		{"barrier, deadline first", 5 * time.Second, 500 * time.Millisecond, collective.None, true},
		{"barrier, no deadline", 500 * time.Millisecond, 0, collective.None, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewMem()
			defer st.Close()
			comms := make([]*collective.Comm, world)
			var wg sync.WaitGroup
			for r := range comms {
				dev := r
				c, err := collective.New(st, r, world, collective.Options{Backend: b, Device: &dev, BufferSize: 64 << 10, Timeout: tc.timeout})
				require.NoError(t, err)
				defer c.Close()
				comms[r] = c
				wg.Go(func() { require.NoError(t, c.Rendezvous(ctx)) })
			}
			wg.Wait()
			errs := make([]error, world)
			for r, c := range comms[:absent] {
				wg.Go(func() {
					cctx := context.Background() // the comm's timeout bounds the call
					if tc.deadline > 0 {
						var ccancel context.CancelFunc
						cctx, ccancel = context.WithTimeout(ctx, tc.deadline)
						defer ccancel()
					}
					if tc.barrier {
						errs[r] = c.Barrier(cctx)
						return
					}
					s, err := c.Device().NewStream(ctx)
					require.NoError(t, err)
					defer s.Close()
					buf, err := c.Device().Alloc(ctx, 4<<10)
					require.NoError(t, err)
					defer buf.Close()
					w, err := c.AllReduce(cctx, s, buf.Ptr(), 1000, backend.Float32, backend.Sum, tc.algo)
					if err != nil {
						errs[r] = err
						return
					}
					defer w.Close()
					errs[r] = w.Synchronize(cctx)
				})
			}
			wg.Wait()
			for r, err := range errs[:absent] {
				require.Error(t, err, "rank %d", r)
				require.ErrorContains(t, err, fmt.Sprintf("rank %d", absent), "rank %d's error does not name the absent rank", r)
				t.Logf("rank %d: %v", r, err)
			}
		})
	}
}
