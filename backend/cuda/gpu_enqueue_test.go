//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// BenchmarkGPUEnqueue measures what an eager call costs the calling
// thread: the host time of the Comm method (its checks, the call record,
// the kernels' launches through the driver) until it returns, not the
// kernels' run. All-reduce by algorithm and size; at 1 KiB also the
// average (a sum and a division: two launches), the Direct
// reduce-scatter (1 KiB) and all-gather (1 and 256 KiB of output). ns/op
// is the wall time per call of the whole pattern: a rank a whole batch
// ahead of its peer, whose kernels wait on the device. Two ranks on devices 0
// and 1 (ranks sharing a device meet through the store around every
// launch, which would be what it measured): in each batch rank 0 enqueues
// its calls on its stream, then rank 1 on its own, each timed alone, then
// both streams are waited for untimed (and their kernels' status
// checked), so the launch queue never fills. ns/call is the slower rank's
// mean. Run with:
//
//	go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
//	.gpu/cuda.test -test.run '^$' -test.bench GPUEnqueue -test.benchtime 20000x
func BenchmarkGPUEnqueue(b *testing.B) {
	allReduce := func(algo collective.Algo, red backend.ReduceOp) enqueueCall {
		return func(ctx context.Context, c *collective.Comm, s backend.Stream, in, _ backend.DevicePtr, n int) error {
			_, err := c.AllReduce(ctx, s, in, n, backend.BFloat16, red, algo)
			return err
		}
	}
	for _, size := range []int{1 << 10, 64 << 10, 256 << 10, 16 << 20} {
		for _, algo := range []collective.Algo{collective.OneShot, collective.TwoShot, collective.Pipeline} {
			if size > 1<<20 && algo != collective.Pipeline {
				continue
			}
			b.Run(fmt.Sprintf("%s/%dKiB", algo, size>>10), func(b *testing.B) { benchEnqueue(b, size, allReduce(algo, backend.Sum)) })
		}
	}
	b.Run("oneshot-avg/1KiB", func(b *testing.B) { benchEnqueue(b, 1<<10, allReduce(collective.OneShot, backend.Avg)) })
	b.Run("reducescatter-direct/1KiB", func(b *testing.B) {
		benchEnqueue(b, 1<<10, func(ctx context.Context, c *collective.Comm, s backend.Stream, in, out backend.DevicePtr, n int) error {
			_, err := c.ReduceScatter(ctx, s, in, out, n/c.World(), backend.BFloat16, backend.Sum, collective.Direct)
			return err
		})
	})
	for _, size := range []int{1 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("allgather-direct/%dKiB", size>>10), func(b *testing.B) {
			benchEnqueue(b, size, func(ctx context.Context, c *collective.Comm, s backend.Stream, in, out backend.DevicePtr, n int) error {
				_, err := c.AllGather(ctx, s, in, out, n/c.World(), backend.BFloat16, collective.Direct)
				return err
			})
		})
	}
}

// enqueueCall makes one call of a bf16 buffer of n elements at in (the
// whole input of an all-reduce or reduce-scatter, the whole output of an
// all-gather); out is a second buffer of that size.
type enqueueCall func(ctx context.Context, c *collective.Comm, s backend.Stream, in, out backend.DevicePtr, n int) error

func benchEnqueue(b *testing.B, size int, call enqueueCall) {
	cb := openGPU(b)
	ctx := timeout(b)
	if n, err := cb.DeviceCount(ctx); err != nil || n < 2 {
		b.Skipf("needs 2 GPUs: %d, %v", n, err)
	}
	st := store.NewMem()
	b.Cleanup(func() { st.Close() })
	const world, batch = 2, 64
	comms := make([]*collective.Comm, world)
	streams := make([]backend.Stream, world)
	bufs := make([][2]backend.Allocation, world)
	for r := range world {
		dev := r
		c, err := collective.New(st, r, world, collective.Options{Backend: cb, Device: &dev, BufferSize: 32 << 20})
		require.NoError(b, err)
		closeLater(b, c)
		comms[r] = c
	}
	require.NoError(b, eachRank(world, func(r int) error {
		if err := comms[r].Rendezvous(ctx); err != nil {
			return err
		}
		d := comms[r].Device()
		var err error
		if streams[r], err = d.NewStream(ctx); err != nil {
			return err
		}
		closeLater(b, streams[r])
		for i := range bufs[r] {
			if bufs[r][i], err = d.Alloc(ctx, size); err != nil {
				return err
			}
			closeLater(b, bufs[r][i])
		}
		return nil
	}))
	count := size / 2
	spent := make([]time.Duration, world)
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		// One rank's calls at a time, so that neither waits on the other
		// in the driver; the kernels meet on the device once both are in.
		for r := range world {
			c, s, in, out := comms[r], streams[r], bufs[r][0].Ptr(), bufs[r][1].Ptr()
			start := time.Now()
			for range n {
				require.NoError(b, call(ctx, c, s, in, out, count))
			}
			spent[r] += time.Since(start)
		}
		for r, s := range streams {
			require.NoError(b, s.Synchronize(ctx))
			// A kernel that failed (a timeout, a mismatch) would make a
			// fast but empty call: every batch must have run.
			require.NoError(b, comms[r].CheckStatus(), "rank %d", r)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(max(spent[0], spent[1]).Nanoseconds())/float64(b.N), "ns/call")
}
