//go:build linux

package fake_test

import (
	"context"
	"fmt"
	"log"

	"github.com/intranode/intranode/backend/fake"
)

func ExampleNew() {
	ctx := context.Background()
	b, err := fake.New(fake.WithDevices(2), fake.WithTopology(fake.PresetPairs))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	d, err := b.Open(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	a, err := d.Alloc(ctx, 64)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	if err := d.CopyToDevice(ctx, a.Ptr(), []byte("hello, device")); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 13)
	if err := d.CopyFromDevice(ctx, got, a.Ptr()); err != nil {
		log.Fatal(err)
	}
	peer, err := b.PeerAccess(ctx, 0, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s (peer access 0→1: %v)\n", d.Info().PCIBusID, got, peer)
	// Output: 0000:01:00.0: hello, device (peer access 0→1: true)
}
