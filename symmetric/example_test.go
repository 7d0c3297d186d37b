package symmetric_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/intranode/intranode/backend/fake"
	_ "github.com/intranode/intranode/kernels/cpu" // the fake backend's kernels
	"github.com/intranode/intranode/symmetric"
	"github.com/intranode/intranode/symmetric/store"
)

// Two ranks share memory: each writes its rank into its own buffer, and
// after a device-side barrier reads its peer's.
func ExampleBlock_Rendezvous() {
	ctx := context.Background()
	b, err := fake.New(fake.WithDevices(2))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	st := store.NewMem()
	defer st.Close()
	seen := make([]byte, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev, err := b.Open(ctx, rank)
			if err != nil {
				panic(err)
			}
			defer dev.Close()
			blk, err := symmetric.Alloc(ctx, b, dev, 4096)
			if err != nil {
				panic(err)
			}
			mem, err := blk.Rendezvous(ctx, "example", symmetric.GroupInfo{Rank: rank, World: 2, Store: st})
			if err != nil {
				panic(err)
			}
			defer mem.Close()
			if err := dev.CopyToDevice(ctx, mem.Buffer(rank), []byte{byte(10 + rank)}); err != nil {
				panic(err)
			}
			if err := mem.Barrier(ctx, 0); err != nil {
				panic(err)
			}
			got := make([]byte, 1)
			if err := dev.CopyFromDevice(ctx, got, mem.Buffer(1-rank)); err != nil {
				panic(err)
			}
			seen[rank] = got[0]
			if err := mem.Barrier(ctx, 0); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("rank 0 read", seen[0], "from rank 1; rank 1 read", seen[1], "from rank 0")
	// Output: rank 0 read 11 from rank 1; rank 1 read 10 from rank 0
}
