//go:build cuda

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric"
	"github.com/intranode/intranode/symmetric/store"
)

// TestGPUConfirm runs the confirmation that follows a vendor library's
// call (kernels.ConfirmKernel) on the GPU, two ranks sharing device 0: a
// barrier while neither has failed; once rank 0's failed word is set, it
// confirms nothing and rank 1 times out naming it on ConfirmChannel.
func TestGPUConfirm(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	st := store.NewMem()
	t.Cleanup(func() { st.Close() })
	const world = 2
	mems := make([]*symmetric.Memory, world)
	streams := make([]backend.Stream, world)
	status := make([]backend.HostAllocation, world)
	require.NoError(t, eachRank(world, func(r int) error {
		dev := openDevice(t, b, 0)
		blk, err := symmetric.Alloc(ctx, b, dev, 64<<10, symmetric.WithAllowOverlap(true))
		if err != nil {
			return err
		}
		if mems[r], err = blk.Rendezvous(ctx, "confirm", symmetric.GroupInfo{Rank: r, World: world, Store: st}); err != nil {
			return err
		}
		closeLater(t, mems[r])
		if streams[r], err = dev.NewStream(ctx); err != nil {
			return err
		}
		closeLater(t, streams[r])
		if status[r], err = dev.AllocHost(ctx, 64); err != nil {
			return err
		}
		closeLater(t, status[r])
		return nil
	}))
	confirm := func(limit time.Duration) []uint32 {
		words := make([]uint32, world)
		require.NoError(t, eachRank(world, func(r int) error {
			if err := mems[r].Confirm(ctx, streams[r], status[r].Ptr(), uint64(limit)); err != nil {
				return err
			}
			if err := streams[r].Synchronize(ctx); err != nil {
				return fmt.Errorf("confirm: %w", err)
			}
			words[r] = symmetric.TakeStatus(status[r].Bytes())
			return nil
		}))
		return words
	}
	for i := range 3 {
		require.Equal(t, []uint32{0, 0}, confirm(10*time.Second), "confirmation %d", i)
	}
	symmetric.SetFailed(status[0].Bytes())
	start := time.Now()
	got := confirm(200 * time.Millisecond)
	require.Zero(t, got[0], "the failed rank reports nothing")
	require.Equal(t, kernels.EncodeStatus(kernels.StatusTimeout, 0, kernels.ConfirmChannel), got[1])
	require.Less(t, time.Since(start), 5*time.Second)
}
