package collective_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// launchDropper is a stream whose kernel launches are counted and dropped,
// so that a call's host path can be timed without the kernel's run.
type launchDropper struct {
	backend.Stream
	launches int
}

func (s *launchDropper) Launch(backend.Function, backend.LaunchConfig, ...backend.Arg) error {
	s.launches++
	return nil
}

// hostPath is rank 0 of a fake world-2 comm, with 1 KiB buffers and a
// stream that drops the kernels, and its eager calls by name.
type hostPath struct {
	s     *launchDropper
	calls []pathCall
}

type pathCall struct {
	name string
	call func(s backend.Stream) (*collective.Work, error)
}

func newHostPath(tb testing.TB) hostPath {
	ctx := context.Background()
	fb, err := fake.New(fake.WithDevices(2))
	require.NoError(tb, err)
	tb.Cleanup(func() { fb.Close() })
	st := store.NewMem()
	tb.Cleanup(func() { st.Close() })
	comms := make([]*collective.Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		comms[r], err = collective.New(st, r, 2, collective.Options{Backend: fb, BufferSize: 1 << 20})
		require.NoError(tb, err)
		tb.Cleanup(func() { comms[r].Close() })
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = comms[r].Rendezvous(ctx) }()
	}
	wg.Wait()
	require.NoError(tb, errors.Join(errs...))
	c := comms[0]
	dev := c.Device()
	const count = 256 // 1 KiB of float32
	in, err := dev.Alloc(ctx, 4*count*2)
	require.NoError(tb, err)
	tb.Cleanup(func() { in.Close() })
	out, err := dev.Alloc(ctx, 4*count*2)
	require.NoError(tb, err)
	tb.Cleanup(func() { out.Close() })
	real, err := dev.NewStream(ctx)
	require.NoError(tb, err)
	tb.Cleanup(func() { real.Close() })
	return hostPath{s: &launchDropper{Stream: real}, calls: []pathCall{
		{"all_reduce/oneshot/in_place", func(s backend.Stream) (*collective.Work, error) {
			return c.AllReduce(ctx, s, in.Ptr(), count, backend.Float32, backend.Sum, collective.OneShot)
		}},
		{"all_reduce/oneshot/out_of_place", func(s backend.Stream) (*collective.Work, error) {
			return c.AllReduce(ctx, s, in.Ptr(), count, backend.Float32, backend.Sum, collective.OneShot, collective.Output(out.Ptr()))
		}},
		{"all_gather/direct", func(s backend.Stream) (*collective.Work, error) {
			return c.AllGather(ctx, s, in.Ptr(), out.Ptr(), count, backend.Float32, collective.Direct)
		}},
	}}
}

// TestHostPathAllocations holds an eager call's host path to the
// allocation it cannot do without: the Work it returns.
func TestHostPathAllocations(t *testing.T) {
	hp := newHostPath(t)
	want := map[string]float64{"all_reduce/oneshot/in_place": 1, "all_reduce/oneshot/out_of_place": 1, "all_gather/direct": 1}
	for _, hc := range hp.calls {
		got := testing.AllocsPerRun(100, func() {
			w, err := hc.call(hp.s)
			require.NoError(t, err)
			require.NoError(t, w.Close())
		})
		require.Equal(t, want[hc.name], got, "%s: allocations a call", hc.name)
	}
	require.Equal(t, 3*101, hp.s.launches, "one launch a call")
}

// BenchmarkHostPath times what an eager call costs the calling thread in
// Go before the backend's launch: the checks, the call record, the launch
// arguments and the Work, on rank 0 of a fake world-2 comm whose stream
// drops the kernels (so the driver's launch, which NCCL pays too, is not
// in it). Run with go test -run '^$' -bench HostPath -benchmem
// ./collective.
func BenchmarkHostPath(b *testing.B) {
	hp := newHostPath(b)
	for _, hc := range hp.calls {
		b.Run(hc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := hc.call(hp.s)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
