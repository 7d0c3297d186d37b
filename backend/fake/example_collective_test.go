//go:build linux

package fake_test

// This file imports only what the collective package doc says a program on
// the fake backend needs: collective and backend/fake (and a store). The
// fake's kernels come with collective.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// Two ranks on the fake backend rendezvous and all-reduce three floats,
// with no import of kernels/cpu.
func ExampleNew_collective() {
	ctx := context.Background()
	b, err := fake.New(fake.WithDevices(2))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	st := store.NewMem()
	defer st.Close()
	sums := make([][]float32, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Go(func() {
			c, err := collective.New(st, rank, 2, collective.Options{Backend: b, BufferSize: 1 << 20})
			if err != nil {
				panic(err)
			}
			defer c.Close()
			if err := c.Rendezvous(ctx); err != nil {
				panic(err)
			}
			host := make([]byte, 12)
			for i := range 3 {
				binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(rank+1)*float32(i+1)))
			}
			dev := c.Device()
			buf, err := dev.Alloc(ctx, len(host))
			if err != nil {
				panic(err)
			}
			defer buf.Close()
			s, err := dev.NewStream(ctx)
			if err != nil {
				panic(err)
			}
			defer s.Close()
			if err := dev.CopyToDevice(ctx, buf.Ptr(), host); err != nil {
				panic(err)
			}
			w, err := c.AllReduce(ctx, s, buf.Ptr(), 3, backend.Float32, backend.Sum, collective.OneShot)
			if err != nil {
				panic(err)
			}
			if err := w.Synchronize(ctx); err != nil {
				panic(err)
			}
			if err := dev.CopyFromDevice(ctx, host, buf.Ptr()); err != nil {
				panic(err)
			}
			for i := range 3 {
				sums[rank] = append(sums[rank], math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:])))
			}
			if err := c.Barrier(ctx); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(sums[0], sums[1])
	// Output: [3 6 9] [3 6 9]
}
