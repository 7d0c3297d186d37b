package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/internal/numeric"
	_ "github.com/intranode/intranode/kernels/cpu" // the fake backend's kernels
	"github.com/intranode/intranode/symmetric/store"
)

// clients connects world clients, one per rank with its own lease, to a
// fresh prefix of srv.
func clients(ctx context.Context, srv *testServer, world int, opts ...store.Option) ([]store.Store, func(), error) {
	prefix := freshPrefix()
	out := make([]store.Store, 0, world)
	release := func() {
		for _, s := range out {
			_ = s.Close()
		}
	}
	for r := range world {
		s, err := New(ctx, Config{Endpoints: []string{srv.endpoint}, Prefix: prefix, Member: fmt.Sprintf("rank%d", r)}, opts...)
		if err != nil {
			release()
			return nil, nil, err
		}
		out = append(out, s)
	}
	return out, release, nil
}

// TestConformanceSuite runs the whole backend conformance suite on the
// fake backend with every rank meeting the others through its own etcd
// client, as the ranks of a multi-host job would.
func TestConformanceSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole suite over etcd; run without -short")
	}
	t.Parallel() // overlapped with the lease tests, which wait out their TTLs
	srv := startServer(t)
	const timeout = 60 * time.Second
	conformance.RunTests(t, conformance.Config{Backend: "fake", Worlds: []int{2, 4}, Quick: true, Timeout: timeout,
		NewStores: func(ctx context.Context, world int) ([]store.Store, func(), error) {
			return clients(ctx, srv, world, store.WithTimeout(timeout))
		}})
}

// Two hosts of two ranks each rendezvous through etcd, every rank with its
// own client, and form one intra-node group per host that all-reduces.
func TestHostGroupsOverEtcd(t *testing.T) {
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	defer b.Close()
	const world = 4
	stores, release, err := clients(ctx, srv, world)
	require.NoError(t, err)
	defer release()

	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = joinAndReduce(ctx, b, stores[r], r, world, fmt.Sprintf("node-%d", r/2))
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// joinAndReduce is one rank of TestHostGroupsOverEtcd.
func joinAndReduce(ctx context.Context, b backend.Backend, st store.Store, rank, world int, host string) (err error) {
	h, err := collective.JoinHosts(ctx, st, rank, world, collective.Options{Backend: b, Hostname: host, BufferSize: 64 << 10})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.Close()) }()
	switch {
	case h.Err != nil:
		return h.Err
	case h.LocalWorld() != 2 || !h.AllJoined() || len(h.Groups) != 2:
		return fmt.Errorf("rank %d: local world %d, %d groups, excluded %v", rank, h.LocalWorld(), len(h.Groups), h.Excluded)
	}
	c := h.Comm
	const count = 1001
	d := backend.Float32
	dev := c.Device()
	buf, err := dev.Alloc(ctx, count*d.Size())
	if err != nil {
		return err
	}
	defer buf.Close()
	seed := 40 + rank/2 // per host, so groups that mixed would get wrong sums
	data := make([]byte, count*d.Size())
	numeric.Pattern(d, data, count, c.Rank(), seed)
	if err := dev.CopyToDevice(ctx, buf.Ptr(), data); err != nil {
		return err
	}
	s, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	w, err := c.AllReduce(ctx, s, buf.Ptr(), count, d, backend.Sum, c.SelectAllReduceAlgo(count, d))
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Synchronize(ctx); err != nil {
		return err
	}
	if err := dev.CopyFromDevice(ctx, data, buf.Ptr()); err != nil {
		return err
	}
	want := make([]byte, len(data))
	numeric.Expected(d, backend.Sum, want, count, c.World(), seed)
	if wrong, first := numeric.Compare(d, data, want, count); wrong > 0 {
		return fmt.Errorf("rank %d: %d elements wrong, first %v", rank, wrong, first)
	}
	return c.Barrier(ctx)
}
