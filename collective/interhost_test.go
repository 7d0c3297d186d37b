package collective_test

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
	"github.com/intranode/intranode/symmetric/store"
)

// hostCall checks one HostGroups collective on rank h, on its comm's
// device (conformance.CheckHostCollective).
func hostCall(ctx context.Context, h *collective.HostGroups, op collective.Op, d backend.DType, count, seed int, inPlace bool) error {
	if h.Comm == nil {
		return fmt.Errorf("rank %d has no comm", h.Rank)
	}
	return conformance.CheckHostCollective(ctx, h, h.Comm.Device(), op, d, count, seed, inPlace)
}

// simulatedHosts joins world ranks (goroutines) of one fake backend with
// the given number of devices into host groups, rank r telling host
// hostOf(r); the backend and store outlive the groups.
func simulatedHosts(t *testing.T, ctx context.Context, devices, world int, hostOf func(int) string) ([]*collective.HostGroups, *store.Mem) {
	t.Helper()
	b, err := fake.New(fake.WithDevices(devices))
	require.NoError(t, err)
	st := store.NewMem()
	// Cleanups run last first: these after the groups' from joinAll.
	t.Cleanup(func() { b.Close() })
	t.Cleanup(func() { st.Close() })
	return joinAll(t, ctx, st, world, func(r int) collective.Options {
		return collective.Options{Backend: b, Hostname: hostOf(r), BufferSize: 64 << 10, Timeout: 20 * time.Second}
	}), st
}

// TestHostGroupsCollectives: all-reduce, reduce-scatter and all-gather
// across simulated hosts of the fake (the loopback inter-host double
// between them), every rank checked exactly, for 2 hosts of 2 and of 4
// ranks and 4 hosts of 2, ranks placed host by host or interleaved (as
// some launchers place them; rank order is then local-index order), counts
// with and without a remainder, in and out of place.
func TestHostGroupsCollectives(t *testing.T) {
	for _, tc := range []struct {
		hosts, perHost int
		interleaved    bool
	}{{2, 2, false}, {2, 4, false}, {4, 2, false}, {2, 2, true}, {4, 2, true}} {
		hostOf := func(r int) string { return fmt.Sprintf("host-%d", r/tc.perHost) }
		if tc.interleaved {
			hostOf = func(r int) string { return fmt.Sprintf("host-%d", r%tc.hosts) }
		}
		t.Run(fmt.Sprintf("%dx%d/interleaved=%v", tc.hosts, tc.perHost, tc.interleaved), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
			defer cancel()
			world := tc.hosts * tc.perHost
			groups, st := simulatedHosts(t, ctx, tc.perHost, world, hostOf)
			errs := make([]error, world)
			var wg sync.WaitGroup
			for r, h := range groups {
				require.True(t, h.AllJoined())
				wg.Go(func() {
					for _, op := range []collective.Op{collective.OpAllReduce, collective.OpReduceScatter, collective.OpAllGather} {
						for _, d := range []backend.DType{backend.Float32, backend.BFloat16} {
							for _, count := range []int{1, 7, 1000} {
								for _, inPlace := range []bool{false, true} {
									if op == collective.OpReduceScatter && inPlace {
										continue
									}
									if err := hostCall(ctx, h, op, d, count, count+int(op), inPlace); err != nil {
										errs[r] = err
										return
									}
								}
							}
						}
					}
				})
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			require.Empty(t, st.Keys("loopback/intranode/interhost/flat/"), "hierarchical: no flat communicator")

			// Sizes in a Flat window: the engine across every rank.
			for r, h := range groups {
				h.Flat = map[collective.Op][]collective.Window{
					collective.OpAllReduce: {{Min: 4000}}, collective.OpAllGather: {{Min: 1, Max: 1 << 20}}}
				wg.Go(func() {
					errs[r] = errors.Join(hostCall(ctx, h, collective.OpAllReduce, backend.Float32, 1000, 9, false),
						hostCall(ctx, h, collective.OpAllGather, backend.Int32, 1000, 9, true))
				})
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			require.NotEmpty(t, st.Keys("loopback/intranode/interhost/flat/"), "a flat communicator was formed")
		})
	}
}

// TestHostGroupsFlat: with a host of one rank (which cannot form a
// group) the job's collectives take the inter-host engine across every
// rank, the excluded rank included, on a device it opens itself.
func TestHostGroupsFlat(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const world = 3
	groups, _ := simulatedHosts(t, ctx, 2, world, func(r int) string { return []string{"a", "a", "b"}[r] })
	require.False(t, groups[0].AllJoined())
	require.ErrorIs(t, groups[2].Err, collective.ErrWorldSize)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, h := range groups {
		wg.Go(func() {
			dev, err := h.Device(ctx)
			if err != nil {
				errs[r] = err
				return
			}
			for _, op := range []collective.Op{collective.OpAllReduce, collective.OpReduceScatter, collective.OpAllGather} {
				for _, count := range []int{1, 333} {
					if err := conformance.CheckHostCollective(ctx, h, dev, op, backend.Int32, count, count, false); err != nil {
						errs[r] = err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	// Bad arguments are refused before anything is enqueued.
	h := groups[0]
	dev, err := h.Device(ctx)
	require.NoError(t, err)
	s, err := dev.NewStream(ctx)
	require.NoError(t, err)
	defer s.Close()
	for name, call := range map[string]func() (*collective.HostWork, error){
		"nil stream": func() (*collective.HostWork, error) {
			return h.AllReduce(ctx, nil, 0, 0, 1, backend.Float32, backend.Sum)
		},
		"zero count": func() (*collective.HostWork, error) { return h.AllGather(ctx, s, 0, 0, 0, backend.Float32) },
		"bad dtype":  func() (*collective.HostWork, error) { return h.AllGather(ctx, s, 0, 0, 1, backend.DType(99)) },
		"bad op": func() (*collective.HostWork, error) {
			return h.ReduceScatter(ctx, s, 0, 0, 1, backend.Float32, backend.ReduceOp(9))
		},
	} {
		w, err := call()
		require.ErrorIs(t, err, backend.ErrInvalidArgument, name)
		require.Nil(t, w, name)
	}
}

// TestHostGroupsDeadRank: a rank of the second host never makes the call.
// Every other rank of the job fails — its host's ranks inside the host,
// the first host's ranks across it — with a timeout, and no rank waits
// much past its own deadline.
func TestHostGroupsDeadRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const world, dead, deadline = 4, 3, time.Second
	groups, _ := simulatedHosts(t, ctx, 2, world, func(r int) string { return fmt.Sprintf("h%d", r/2) })
	// One good call first forms the inter-host communicators.
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r, h := range groups {
		wg.Go(func() { errs[r] = hostCall(ctx, h, collective.OpAllReduce, backend.Float32, 64, 1, false) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	took := make([]time.Duration, world)
	for r, h := range groups {
		if r == dead {
			continue
		}
		wg.Go(func() {
			cctx, ccancel := context.WithTimeout(ctx, deadline)
			defer ccancel()
			start := time.Now()
			errs[r] = hostCall(cctx, h, collective.OpAllReduce, backend.Float32, 4096, 2, false)
			took[r] = time.Since(start)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if r == dead {
			continue
		}
		require.Error(t, err, "rank %d", r)
		require.ErrorIs(t, err, backend.ErrTimeout, "rank %d", r)
		require.Less(t, took[r], deadline+5*time.Second, "rank %d waited %v", r, took[r])
		t.Logf("rank %d failed after %v: %v", r, took[r].Round(time.Millisecond), err)
	}
}

// TestDefaultHostFlat pins the measured windows of the flat path on CUDA
// (DefaultHostFlat): reduce-scatter and all-gather flat below 32 KiB, the
// all-reduce flat from 32 KiB to 128 KiB, the reduce-scatter from 128 KiB
// to 512 KiB, every collective from DefaultFlatFrom on; hierarchical
// elsewhere.
func TestDefaultHostFlat(t *testing.T) {
	flat := collective.DefaultHostFlat()
	tests := []struct {
		op    collective.Op
		bytes int
		want  bool
	}{
		{collective.OpAllReduce, 1 << 10, false},
		{collective.OpAllReduce, 16 << 10, false},
		{collective.OpAllReduce, 32 << 10, true},
		{collective.OpAllReduce, 64 << 10, true},
		{collective.OpAllReduce, 128 << 10, false},
		{collective.OpAllReduce, 16 << 20, false},
		{collective.OpAllReduce, collective.DefaultFlatFrom, true},
		{collective.OpReduceScatter, 1, true},
		{collective.OpReduceScatter, 32<<10 - 1, true},
		{collective.OpReduceScatter, 32 << 10, false},
		{collective.OpReduceScatter, 64 << 10, false},
		{collective.OpReduceScatter, 128 << 10, true},
		{collective.OpReduceScatter, 256 << 10, true},
		{collective.OpReduceScatter, 512 << 10, false},
		{collective.OpAllGather, 16 << 10, true},
		{collective.OpAllGather, 1 << 20, false},
		{collective.OpAllGather, 256 << 20, true},
		{collective.OpBroadcast, 1 << 10, false},
	}
	for _, tt := range tests {
		got := false
		for _, w := range flat[tt.op] {
			got = got || w.Contains(tt.bytes)
		}
		require.Equal(t, tt.want, got, "%v %d bytes", tt.op, tt.bytes)
	}
}

// TestHostGroupsMismatchAcrossHosts: the ranks of each host agree among
// themselves but the hosts' calls differ — in count on the hierarchical
// path, in the collective on the flat one. Every rank fails with
// ErrMismatch from the call check across hosts, naming the calls of the
// step's members, within its deadline; the job's next call is refused with
// ErrCommFailed. (The mismatch aborts the engines at once, whose kernels
// end; on the hierarchical path a host's ranks may still wait inside the
// host until the deadline, for a peer whose stream the aborted step
// failed, as the fake's streams keep a failed op's error.) With NoCallCheck the check is not made (the fake's
// loopback engine, a Comm, still compares the calls of its own steps; NCCL
// compares none).
func TestHostGroupsMismatchAcrossHosts(t *testing.T) {
	const world, deadline = 4, 3 * time.Second
	hostOf := func(r int) string { return fmt.Sprintf("h%d", r/2) }
	type call struct {
		op    collective.Op
		count int
	}
	for _, tc := range []struct {
		name     string
		flat     bool
		noCheck  bool
		h0, h1   call
		contains string
	}{
		{name: "hierarchical/count", h0: call{collective.OpAllReduce, 1000}, h1: call{collective.OpAllReduce, 1002},
			contains: "(h1) call 1: all_reduce of 1002 float sum, hierarchical"},
		{name: "flat/collective", flat: true, h0: call{collective.OpAllReduce, 64}, h1: call{collective.OpAllGather, 16},
			contains: "rank 3 (h1) call 1: all_gather of 16 float, flat"},
		{name: "unchecked/count", noCheck: true, h0: call{collective.OpAllReduce, 1000}, h1: call{collective.OpAllReduce, 1002}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			b, err := fake.New(fake.WithDevices(2))
			require.NoError(t, err)
			st := store.NewMem()
			t.Cleanup(func() { b.Close() })
			t.Cleanup(func() { st.Close() })
			groups := joinAll(t, ctx, st, world, func(r int) collective.Options {
				return collective.Options{Backend: b, Hostname: hostOf(r), BufferSize: 64 << 10, Timeout: 2 * time.Second}
			})
			errs := make([]error, world)
			took := make([]time.Duration, world)
			var wg sync.WaitGroup
			for r, h := range groups {
				if tc.flat {
					h.Flat = map[collective.Op][]collective.Window{collective.OpAllReduce: {{}}, collective.OpAllGather: {{}}}
				}
				h.NoCallCheck = tc.noCheck
				c := tc.h0
				if r >= 2 {
					c = tc.h1
				}
				wg.Go(func() {
					cctx, ccancel := context.WithTimeout(ctx, deadline)
					defer ccancel()
					start := time.Now()
					errs[r] = hostCall(cctx, h, c.op, backend.Float32, c.count, 1, false)
					took[r] = time.Since(start)
				})
			}
			wg.Wait()
			for r, err := range errs {
				if tc.noCheck {
					if err != nil {
						require.NotContains(t, err.Error(), "across hosts", "rank %d", r)
					}
					continue
				}
				require.ErrorIs(t, err, collective.ErrMismatch, "rank %d", r)
				require.ErrorContains(t, err, "across hosts", "rank %d", r)
				require.ErrorContains(t, err, tc.contains, "rank %d", r)
				require.Less(t, took[r], deadline+2*time.Second, "rank %d", r)
				t.Logf("rank %d failed after %v: %v", r, took[r].Round(time.Millisecond), err)
				// The job's next call across hosts is refused.
				s, err := groups[r].Comm.Device().NewStream(ctx)
				require.NoError(t, err)
				_, err = groups[r].AllReduce(ctx, s, 0, 0, 1000, backend.Float32, backend.Sum)
				require.ErrorIs(t, err, collective.ErrCommFailed, "rank %d", r)
				require.NoError(t, s.Close())
			}
		})
	}
}
