package collective_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

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
