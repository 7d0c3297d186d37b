package collective_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/symmetric/store"
)

// Two ranks (goroutines here; processes in real jobs) form a comm on the
// fake backend and all-reduce four floats. The package imports nothing for
// the fake's kernels: collective brings them, as its doc says (no test of
// this package imports kernels/cpu, so this example fails if it does not).
func ExampleComm_AllReduce() {
	results := onTwoRanks(func(ctx context.Context, c *collective.Comm, rank int) []float64 {
		dev := c.Device()
		buf, err := dev.Alloc(ctx, 16)
		if err != nil {
			panic(err)
		}
		defer buf.Close()
		// rank 0: 0,10,20,30; rank 1: 1,11,21,31
		putFloats(ctx, dev, buf.Ptr(), float64(rank), float64(rank+10), float64(rank+20), float64(rank+30))
		s, err := dev.NewStream(ctx)
		if err != nil {
			panic(err)
		}
		defer s.Close()
		algo := c.SelectAllReduceAlgo(4, backend.Float32)
		w, err := c.AllReduce(ctx, s, buf.Ptr(), 4, backend.Float32, backend.Sum, algo)
		if err != nil {
			panic(err)
		}
		if err := w.Synchronize(ctx); err != nil {
			panic(err)
		}
		return getFloats(ctx, dev, buf.Ptr(), 4)
	})
	fmt.Println("rank 0:", results[0])
	fmt.Println("rank 1:", results[1])
	// Output:
	// rank 0: [1 21 41 61]
	// rank 1: [1 21 41 61]
}

// onTwoRanks forms a comm of two ranks on the fake backend, goroutines of
// this process, runs f on each and returns what each returned.
func onTwoRanks[R any](f func(ctx context.Context, c *collective.Comm, rank int) R) [2]R {
	ctx := context.Background()
	b, err := fake.New(fake.WithDevices(2))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	st := store.NewMem()
	defer st.Close()
	var results [2]R
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := collective.New(st, rank, 2, collective.Options{Backend: b, BufferSize: 1 << 20})
			if err != nil {
				panic(err)
			}
			defer c.Close()
			if err := c.Rendezvous(ctx); err != nil {
				panic(err)
			}
			results[rank] = f(ctx, c, rank)
			if err := c.Barrier(ctx); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	return results
}

// putFloats writes vals as float32s at p.
func putFloats(ctx context.Context, dev backend.Device, p backend.DevicePtr, vals ...float64) {
	host := make([]byte, 4*len(vals))
	for i, v := range vals {
		numeric.Put(backend.Float32, host, i, v)
	}
	if err := dev.CopyToDevice(ctx, p, host); err != nil {
		panic(err)
	}
}

// getFloats reads n float32s at p.
func getFloats(ctx context.Context, dev backend.Device, p backend.DevicePtr, n int) []float64 {
	host := make([]byte, 4*n)
	if err := dev.CopyFromDevice(ctx, host, p); err != nil {
		panic(err)
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = numeric.Get(backend.Float32, host, i)
	}
	return vals
}

// Four ranks of a job on two hosts (goroutines here, telling different
// host names; in a real job, processes on different machines meeting
// through etcd: store.Open(ctx, "etcd://HOST:2379/intranode/JOB")) form one
// intra-node group per host.
func ExampleJoinHosts() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := fake.New(fake.WithDevices(2))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	st := store.NewMem()
	defer st.Close()

	const world = 4
	lines := make([]string, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := fmt.Sprintf("node-%d", rank/2)
			h, err := collective.JoinHosts(ctx, st, rank, world,
				collective.Options{Backend: b, Hostname: host, BufferSize: 64 << 10})
			if err != nil {
				panic(err)
			}
			defer h.Close()
			rails, _ := h.InterNodeRanks()
			lines[rank] = fmt.Sprintf("rank %d: %s local rank %d of %d, inter-node ranks %v, all joined %v",
				rank, h.Group.Host, h.LocalRank, h.LocalWorld(), rails, h.AllJoined())
			// Every rank of a group closes together.
			if err := h.Comm.Barrier(ctx); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// rank 0: node-0 local rank 0 of 2, inter-node ranks [0 2], all joined true
	// rank 1: node-0 local rank 1 of 2, inter-node ranks [1 3], all joined true
	// rank 2: node-1 local rank 0 of 2, inter-node ranks [0 2], all joined true
	// rank 3: node-1 local rank 1 of 2, inter-node ranks [1 3], all joined true
}

// A broadcast whose input lies in the symmetric buffer can run on the copy
// engines: each rank puts its input at the same offset of its own buffer
// (Memory().Buffer(rank)), and SelectMove picks Copy where the backend's
// measurements say the engines are fastest (on the fake: always), so the
// receivers copy the root's data straight out of its buffer.
func ExampleComm_SelectMove() {
	lines := onTwoRanks(func(ctx context.Context, c *collective.Comm, rank int) string {
		dev := c.Device()
		in := c.Memory().Buffer(rank).Add(4096) // the same offset on every rank
		v := float64(7 * (1 - rank))            // rank 0, the root: 7s
		putFloats(ctx, dev, in, v, v, v, v)
		out, err := dev.Alloc(ctx, 16)
		if err != nil {
			panic(err)
		}
		defer out.Close()
		s, err := dev.NewStream(ctx)
		if err != nil {
			panic(err)
		}
		defer s.Close()
		algo := c.SelectMove(collective.OpBroadcast, in, 4, backend.Float32)
		w, err := c.Broadcast(ctx, s, in, 4, backend.Float32, 0, algo, collective.Output(out.Ptr()))
		if err != nil {
			panic(err)
		}
		if err := w.Synchronize(ctx); err != nil {
			panic(err)
		}
		return fmt.Sprintf("rank %d: %v %v", rank, algo, getFloats(ctx, dev, out.Ptr(), 4))
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0: copy [7 7 7 7]
	// rank 1: copy [7 7 7 7]
}
