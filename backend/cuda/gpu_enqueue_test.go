//go:build cuda

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// BenchmarkGPUEnqueue measures what an eager all-reduce costs the calling
// thread: the host time of Comm.AllReduce (its checks, the call record,
// the kernel's launch through the driver) until it returns, not the
// kernel's run. Two ranks on devices 0 and 1 (ranks sharing a device meet
// through the store around every launch, which would be what it
// measured): in each batch rank 0 enqueues its calls on its stream, then
// rank 1 on its own, each timed alone, then both streams are waited for
// untimed, so the launch queue never fills. ns/call is the slower rank's
// mean. Run with:
//
//	go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
//	.gpu/cuda.test -test.run '^$' -test.bench GPUEnqueue -test.benchtime 20000x
func BenchmarkGPUEnqueue(b *testing.B) {
	for _, size := range []int{1 << 10, 256 << 10, 16 << 20} {
		for _, algo := range []collective.Algo{collective.OneShot, collective.TwoShot, collective.Pipeline} {
			if size > 1<<20 && algo != collective.Pipeline {
				continue
			}
			b.Run(fmt.Sprintf("%s/%dKiB", algo, size>>10), func(b *testing.B) { benchEnqueue(b, size, algo) })
		}
	}
}

func benchEnqueue(b *testing.B, size int, algo collective.Algo) {
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
	bufs := make([]backend.Allocation, world)
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
		if bufs[r], err = d.Alloc(ctx, size); err != nil {
			return err
		}
		closeLater(b, bufs[r])
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
			c, s, p := comms[r], streams[r], bufs[r].Ptr()
			start := time.Now()
			for range n {
				_, err := c.AllReduce(ctx, s, p, count, backend.BFloat16, backend.Sum, algo)
				require.NoError(b, err)
			}
			spent[r] += time.Since(start)
		}
		for _, s := range streams {
			require.NoError(b, s.Synchronize(ctx))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(max(spent[0], spent[1]).Nanoseconds())/float64(b.N), "ns/call")
}
