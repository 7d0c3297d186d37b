package store_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/intranode/intranode/symmetric/store"
)

func ExampleNewMem() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := store.NewMem()
	defer s.Close()

	// A Get waits until another rank sets the key.
	go func() { _ = s.Set(ctx, "rank0/hostname", []byte("node-a")) }()
	host, err := s.Get(ctx, "rank0/hostname")
	if err != nil {
		fmt.Println(err)
		return
	}
	n, _ := s.Add(ctx, "arrived", 1)
	fmt.Printf("%s, %d arrived\n", host, n)
	// Output: node-a, 1 arrived
}

func ExampleExchange() {
	const world = 3
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := store.NewMem() // the ranks would each dial a TCP store in practice
	defer s.Close()

	results := make([][][]byte, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex, err := store.NewExchange(s, "handshake-0", rank, world)
			if err != nil {
				panic(err)
			}
			defer ex.Close(ctx)
			all, err := ex.AllGather(ctx, fmt.Appendf(nil, "device %d", rank))
			if err != nil {
				panic(err)
			}
			results[rank] = all
		}()
	}
	wg.Wait()
	for peer, v := range results[0] {
		fmt.Printf("rank 0 sees rank %d: %s\n", peer, v)
	}
	// Output:
	// rank 0 sees rank 0: device 0
	// rank 0 sees rank 1: device 1
	// rank 0 sees rank 2: device 2
}

func ExampleListenTCP() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One rank serves; port 0 picks a free loopback port.
	srv, err := store.ListenTCP("")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	// Every rank, the serving one included, is a client.
	c, err := store.DialTCP(ctx, srv.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_ = c.Set(ctx, "world", []byte("2"))
	v, _ := c.Get(ctx, "world")
	fmt.Printf("world=%s\n", v)
	// Output: world=2
}
