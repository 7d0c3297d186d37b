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
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/symmetric/store"
)

func TestPlanHostGroups(t *testing.T) {
	seq := func(from, to int) []int {
		var out []int
		for r := from; r < to; r++ {
			out = append(out, r)
		}
		return out
	}
	many := func(host string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = host
		}
		return out
	}
	tests := []struct {
		name  string
		hosts []string
		want  []collective.HostGroup
	}{
		{"two hosts interleaved", []string{"a", "b", "a", "b", "a", "b", "a", "b"}, []collective.HostGroup{
			{Host: "a", Parts: 1, Ranks: []int{0, 2, 4, 6}, Prefix: "host/a/"},
			{Host: "b", Parts: 1, Ranks: []int{1, 3, 5, 7}, Prefix: "host/b/"},
		}},
		{"ordered by lowest rank", []string{"z", "a", "a"}, []collective.HostGroup{
			{Host: "z", Parts: 1, Ranks: []int{0}, Prefix: "host/z/"},
			{Host: "a", Parts: 1, Ranks: []int{1, 2}, Prefix: "host/a/"},
		}},
		{"eight fit one group", many("h", 8), []collective.HostGroup{
			{Host: "h", Parts: 1, Ranks: seq(0, 8), Prefix: "host/h/"},
		}},
		{"ten split in two", many("h", 10), []collective.HostGroup{
			{Host: "h", Part: 0, Parts: 2, Ranks: seq(0, 5), Prefix: "host/h/part0/"},
			{Host: "h", Part: 1, Parts: 2, Ranks: seq(5, 10), Prefix: "host/h/part1/"},
		}},
		{"seventeen split in three", many("h", 17), []collective.HostGroup{
			{Host: "h", Part: 0, Parts: 3, Ranks: seq(0, 6), Prefix: "host/h/part0/"},
			{Host: "h", Part: 1, Parts: 3, Ranks: seq(6, 12), Prefix: "host/h/part1/"},
			{Host: "h", Part: 2, Parts: 3, Ranks: seq(12, 17), Prefix: "host/h/part2/"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collective.PlanHostGroups(tc.hosts)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"", "a/b"} {
		_, err := collective.PlanHostGroups([]string{"ok", bad})
		require.ErrorIs(t, err, backend.ErrInvalidArgument, "host %q", bad)
	}
}

// joinAll runs JoinHosts on world goroutines sharing st; opts(r) gives rank
// r's options.
func joinAll(t *testing.T, ctx context.Context, st store.Store, world int, opts func(r int) collective.Options) []*collective.HostGroups {
	t.Helper()
	out := make([]*collective.HostGroups, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r], errs[r] = collective.JoinHosts(ctx, st, r, world, opts(r))
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, h := range out {
		t.Cleanup(func() { require.NoError(t, h.Close()) })
	}
	return out
}

// allReduceCheck all-reduces (sums) count elements of pattern data on the
// comm and checks the result exactly.
func allReduceCheck(ctx context.Context, c *collective.Comm, d backend.DType, algo collective.Algo, count, seed int) error {
	return reduceCheck(ctx, c, d, backend.Sum, algo, count, seed)
}

// reduceCheck is allReduceCheck with op.
func reduceCheck(ctx context.Context, c *collective.Comm, d backend.DType, op backend.ReduceOp, algo collective.Algo, count, seed int) error {
	dev := c.Device()
	n := count * d.Size()
	buf, err := dev.Alloc(ctx, n)
	if err != nil {
		return err
	}
	defer buf.Close()
	host := make([]byte, n)
	numeric.Pattern(d, host, count, c.Rank(), seed)
	if err := dev.CopyToDevice(ctx, buf.Ptr(), host); err != nil {
		return err
	}
	s, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	w, err := c.AllReduce(ctx, s, buf.Ptr(), count, d, op, algo)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Synchronize(ctx); err != nil {
		return err
	}
	if err := dev.CopyFromDevice(ctx, host, buf.Ptr()); err != nil {
		return err
	}
	want := make([]byte, n)
	numeric.Expected(d, op, want, count, c.World(), seed)
	if wrong, first := numeric.Compare(d, host, want, count); wrong > 0 {
		return fmt.Errorf("%v %v %v count %d: %d elements wrong, first %v", algo, d, op, count, wrong, first)
	}
	return nil
}

// Two hosts of four ranks each (goroutines telling different host names,
// interleaved as some launchers place them) form two groups of four that
// each all-reduce on their own.
func TestJoinHostsTwoHostsOfFour(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := fake.New(fake.WithDevices(4))
	require.NoError(t, err)
	defer b.Close()
	st := store.NewMem()
	defer st.Close()
	const world = 8
	hostOf := func(r int) string { return fmt.Sprintf("node-%c", 'a'+r%2) }
	groups := joinAll(t, ctx, st, world, func(r int) collective.Options {
		return collective.Options{Backend: b, Hostname: hostOf(r), BufferSize: 256 << 10}
	})

	for r, h := range groups {
		require.NoError(t, h.Err, "rank %d", r)
		require.NotNil(t, h.Comm, "rank %d", r)
		require.True(t, h.AllJoined())
		require.Empty(t, h.Excluded)
		require.Equal(t, hostOf(r), h.Group.Host)
		require.Equal(t, 4, h.LocalWorld())
		require.Equal(t, r/2, h.LocalRank)
		require.Equal(t, h.LocalRank, h.Comm.Rank())
		require.Equal(t, 4, h.Comm.World())
		require.Equal(t, h.LocalRank, h.Comm.Device().Index(), "device = index among the host's ranks")
		require.Len(t, h.Groups, 2)
		rails, err := h.InterNodeRanks()
		require.NoError(t, err)
		require.Equal(t, []int{r - r%2, r - r%2 + 1}, rails, "rank %d's inter-node ranks", r)
	}
	require.NotEmpty(t, st.Keys("host/node-a/"), "each group keeps its keys under its host's prefix")
	require.NotEmpty(t, st.Keys("host/node-b/"))

	// Each group all-reduces its own data: different seeds per host, so
	// a group that reached across hosts would get the wrong sums.
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, h := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seed := 100 + r%2
			for _, algo := range []collective.Algo{collective.OneShot, collective.TwoShot} {
				for _, d := range []backend.DType{backend.Float32, backend.BFloat16} {
					for _, count := range []int{1, 1000, 4099} {
						if err := allReduceCheck(ctx, h.Comm, d, algo, count, seed); err != nil {
							errs[r] = fmt.Errorf("rank %d: %w", r, err)
							return
						}
					}
				}
			}
			errs[r] = h.Comm.Barrier(ctx)
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// A host with one rank cannot form a group, and a group refused by its
// rendezvous is reported to every rank of the job, with a reason that
// errors.Is recognises on ranks of other hosts too.
func TestJoinHostsReportsExclusions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	defer b.Close()
	st := store.NewMem()
	defer st.Close()
	hosts := []string{"good", "good", "lonely", "shared", "shared"}
	zero := 0
	groups := joinAll(t, ctx, st, len(hosts), func(r int) collective.Options {
		o := collective.Options{Backend: b, Hostname: hosts[r], BufferSize: 64 << 10}
		if hosts[r] == "shared" {
			o.Device = &zero // both ranks on one device: refused
		}
		return o
	})

	for r, h := range groups {
		require.False(t, h.AllJoined())
		require.Len(t, h.Excluded, 3, "rank %d", r)
		require.Equal(t, []int{2, 3, 4}, []int{h.Excluded[0].Rank, h.Excluded[1].Rank, h.Excluded[2].Rank})
		require.ErrorIs(t, h.Excluded[0], collective.ErrWorldSize, "rank %d sees why rank 2 is out", r)
		require.ErrorContains(t, h.Excluded[0], `only rank on host "lonely"`)
		require.Equal(t, "lonely", h.Excluded[0].Host)
		for _, e := range h.Excluded[1:] {
			require.ErrorIs(t, e, collective.ErrOverlappingDevices, "rank %d sees why rank %d is out", r, e.Rank)
		}
		_, err := h.InterNodeRanks()
		require.ErrorIs(t, err, backend.ErrInvalidArgument, "groups of different sizes have no rails")
		switch hosts[r] {
		case "good":
			require.NoError(t, h.Err)
			require.NotNil(t, h.Comm)
		case "lonely":
			require.ErrorIs(t, h.Err, collective.ErrWorldSize)
			require.Nil(t, h.Comm)
		case "shared":
			require.ErrorIs(t, h.Err, collective.ErrOverlappingDevices)
			require.Nil(t, h.Comm)
		}
	}
	require.NoError(t, allReduceBoth(ctx, groups[0].Comm, groups[1].Comm), "the good host still all-reduces")
}

// allReduceBoth runs one checked all-reduce on two comms of one group.
func allReduceBoth(ctx context.Context, a, b *collective.Comm) error {
	errs := make(chan error, 2)
	for _, c := range []*collective.Comm{a, b} {
		go func() { errs <- allReduceCheck(ctx, c, backend.Float32, collective.TwoShot, 777, 5) }()
	}
	return errors.Join(<-errs, <-errs)
}

// A host with more ranks than a comm can span is split into near-equal
// groups, each with its own comm.
func TestJoinHostsSplitsLargeHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const world = 10
	b, err := fake.New(fake.WithDevices(world))
	require.NoError(t, err)
	defer b.Close()
	st := store.NewMem()
	defer st.Close()
	groups := joinAll(t, ctx, st, world, func(r int) collective.Options {
		return collective.Options{Backend: b, Hostname: "big", BufferSize: 64 << 10}
	})
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, h := range groups {
		require.NoError(t, h.Err, "rank %d", r)
		require.Equal(t, r/5, h.Group.Part)
		require.Equal(t, 5, h.LocalWorld())
		require.Equal(t, r, h.Comm.Device().Index(), "devices follow the host-wide index")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = allReduceCheck(ctx, h.Comm, backend.Float32, collective.OneShot, 1001, 7+r/5)
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

func TestJoinHostsRefusesBadArguments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := store.NewMem()
	defer st.Close()
	tests := []struct {
		name        string
		st          store.Store
		rank, world int
		host        string
	}{
		{"nil store", nil, 0, 1, "h"},
		{"rank out of range", st, 2, 2, "h"},
		{"negative rank", st, -1, 2, "h"},
		{"slash in host name", st, 0, 1, "a/b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := collective.JoinHosts(ctx, tc.st, tc.rank, tc.world, collective.Options{Hostname: tc.host})
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
		})
	}
}

// A rank that never arrives fails JoinHosts on the others within their
// deadline, naming it.
func TestJoinHostsMissingRank(t *testing.T) {
	st := store.NewMem()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := collective.JoinHosts(ctx, st, 0, 2, collective.Options{Hostname: "h"})
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "rank 1 did not arrive")
}

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
// hostOf(r), its options as tweaks leave them; the backend and store
// outlive the groups.
func simulatedHosts(t *testing.T, ctx context.Context, devices, world int, hostOf func(int) string,
	tweaks ...func(r int, o *collective.Options)) ([]*collective.HostGroups, *store.Mem) {
	t.Helper()
	b, err := fake.New(fake.WithDevices(devices))
	require.NoError(t, err)
	st := store.NewMem()
	// Cleanups run last first: these after the groups' from joinAll.
	t.Cleanup(func() { b.Close() })
	t.Cleanup(func() { st.Close() })
	return joinAll(t, ctx, st, world, func(r int) collective.Options {
		o := collective.Options{Backend: b, Hostname: hostOf(r), BufferSize: 64 << 10, Timeout: 20 * time.Second}
		for _, tweak := range tweaks {
			tweak(r, &o)
		}
		return o
	}), st
}

// ownDevice gives rank r device r (simulatedHosts' tweak): the fake's
// loopback engine then does not hold a call at its launch, as it does for
// ranks that share a device (NCCL's calls never wait at enqueueing).
func ownDevice(r int, o *collective.Options) { o.Device = &r }

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
	t.Parallel()
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

// TestHostGroupsClosedRank: a rank of the second host closes its groups
// after a good call, and the others call again. Each of them fails with
// backend.ErrPeerFailed naming that rank, whose call check's connection
// closed before its record of the call arrived, well before its deadline
// (the call's data step, which would wait for that rank, is aborted), on
// both paths. Each rank has a device of its own (ownDevice).
func TestHostGroupsClosedRank(t *testing.T) {
	t.Parallel()
	const world, gone = 4, 3
	for _, flat := range []bool{false, true} {
		t.Run(fmt.Sprintf("flat=%v", flat), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			groups, _ := simulatedHosts(t, ctx, world, world, func(r int) string { return fmt.Sprintf("h%d", r/2) }, ownDevice)
			var wg sync.WaitGroup
			errs := make([]error, world)
			for r, h := range groups {
				if flat {
					h.Flat = map[collective.Op][]collective.Window{collective.OpAllReduce: {{}}}
				}
				wg.Go(func() { errs[r] = hostCall(ctx, h, collective.OpAllReduce, backend.Float32, 64, 1, false) })
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			require.NoError(t, groups[gone].Close())
			for r, h := range groups {
				if r != gone {
					wg.Go(func() {
						cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
						defer ccancel()
						errs[r] = hostCall(cctx, h, collective.OpAllReduce, backend.Float32, 4096, 2, false)
					})
				}
			}
			wg.Wait()
			for r, err := range errs {
				if r == gone {
					continue
				}
				// (Rank 2, on the closed rank's host, also waits inside it
				// until its deadline, for its kernel waiting for rank 3.)
				require.ErrorIs(t, err, backend.ErrPeerFailed, "rank %d", r)
				require.ErrorContains(t, err, "rank 3 (h1): its records stopped before its call 2", "rank %d", r)
			}
		})
	}
}

// TestHostGroupsWaitWithoutDeadline: after a good call, a rank of the
// second host makes no more; the others call again, flat, with a context
// that has no deadline. Each
// fails with a timeout naming that rank, Options.Timeout bounding the
// wait for its record (the engine's kernels have no deadline of their
// own).
func TestHostGroupsWaitWithoutDeadline(t *testing.T) {
	t.Parallel()
	const world, absent = 4, 3
	groups, _ := simulatedHosts(t, t.Context(), world, world, func(r int) string { return fmt.Sprintf("h%d", r/2) }, ownDevice,
		func(_ int, o *collective.Options) { o.Timeout = 3 * time.Second })
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r, h := range groups { // the first call, by all, forms the engine
		h.Flat = map[collective.Op][]collective.Window{collective.OpAllGather: {{}}}
		wg.Go(func() { errs[r] = hostCall(t.Context(), h, collective.OpAllGather, backend.Float32, 64, 1, false) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for r, h := range groups {
		if r != absent {
			wg.Go(func() { errs[r] = hostCall(t.Context(), h, collective.OpAllGather, backend.Float32, 64, 2, false) })
		}
	}
	wg.Wait()
	for r, err := range errs {
		if r != absent {
			require.ErrorIs(t, err, backend.ErrTimeout, "rank %d", r)
			require.ErrorContains(t, err, "ranks [3] sent no record of call 2", "rank %d", r)
		}
	}
}

// TestDefaultHostFlat pins the measured windows of the flat path on CUDA
// (DefaultHostFlat): reduce-scatter and all-gather flat below 32 KiB, the
// all-reduce flat from 32 KiB to 128 KiB (and below, in a job whose call
// check runs on the mesh), the reduce-scatter from 128 KiB to 512 KiB,
// every collective from DefaultFlatFrom on; hierarchical elsewhere.
func TestDefaultHostFlat(t *testing.T) {
	tests := []struct {
		op    collective.Op
		bytes int
		world int // 0: both a job on the mesh and a larger one
		want  bool
	}{
		{collective.OpAllReduce, 1 << 10, collective.MeshMaxRanks, true},
		{collective.OpAllReduce, 16 << 10, 4, true},
		{collective.OpAllReduce, 1 << 10, collective.MeshMaxRanks + 1, false},
		{collective.OpAllReduce, 16 << 10, 32, false},
		{collective.OpAllReduce, 32 << 10, 0, true},
		{collective.OpAllReduce, 64 << 10, 0, true},
		{collective.OpAllReduce, 128 << 10, 0, false},
		{collective.OpAllReduce, 16 << 20, 0, false},
		{collective.OpAllReduce, collective.DefaultFlatFrom, 0, true},
		{collective.OpReduceScatter, 1, 0, true},
		{collective.OpReduceScatter, 32<<10 - 1, 0, true},
		{collective.OpReduceScatter, 32 << 10, 0, false},
		{collective.OpReduceScatter, 64 << 10, 0, false},
		{collective.OpReduceScatter, 128 << 10, 0, true},
		{collective.OpReduceScatter, 256 << 10, 0, true},
		{collective.OpReduceScatter, 512 << 10, 0, false},
		{collective.OpAllGather, 16 << 10, 0, true},
		{collective.OpAllGather, 1 << 20, 0, false},
		{collective.OpAllGather, 256 << 20, 0, true},
		{collective.OpBroadcast, 1 << 10, 0, false},
	}
	for _, tt := range tests {
		worlds := []int{tt.world}
		if tt.world == 0 {
			worlds = []int{4, 64}
		}
		for _, world := range worlds {
			got := false
			for _, w := range collective.DefaultHostFlat(world)[tt.op] {
				got = got || w.Contains(tt.bytes)
			}
			require.Equal(t, tt.want, got, "%v %d bytes, world %d", tt.op, tt.bytes, world)
		}
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
		flatTo   int  // with flat: the all-reduce flat up to this many bytes only
		warm     bool // h0's and h1's calls made by all ranks first, forming both engines
		noCheck  bool
		h0, h1   call
		contains string
	}{
		{name: "hierarchical/count", h0: call{collective.OpAllReduce, 1000}, h1: call{collective.OpAllReduce, 1002},
			contains: "(h1) call 1: all_reduce of 1002 float sum, hierarchical"},
		{name: "flat/collective", flat: true, h0: call{collective.OpAllReduce, 64}, h1: call{collective.OpAllGather, 16},
			contains: "rank 3 (h1) call 1: all_gather of 16 float, flat"},
		// The hosts' sizes put them on different paths, so on different
		// engines: the mesh's records still meet. (Both engines are formed
		// first: the fake's loopback engine forms at a call's enqueueing.)
		{name: "paths/flat-and-hierarchical", flat: true, flatTo: 4 << 10, warm: true, h0: call{collective.OpAllReduce, 64},
			h1: call{collective.OpAllReduce, 2048}, contains: "rank 0 (h0) call 3: all_reduce of 64 float sum, flat; " +
				"rank 1 (h0) call 3: all_reduce of 64 float sum, flat; rank 2 (h1) call 3: all_reduce of 2048 float sum, hierarchical"},
		{name: "unchecked/count", noCheck: true, h0: call{collective.OpAllReduce, 1000}, h1: call{collective.OpAllReduce, 1002}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			groups, _ := simulatedHosts(t, ctx, world, world, hostOf, ownDevice,
				func(_ int, o *collective.Options) { o.Timeout = 2 * time.Second })
			errs := make([]error, world)
			took := make([]time.Duration, world)
			var wg sync.WaitGroup
			for r, h := range groups {
				if tc.flat {
					h.Flat = map[collective.Op][]collective.Window{collective.OpAllReduce: {{Max: tc.flatTo}}, collective.OpAllGather: {{}}}
				}
				h.NoCallCheck = tc.noCheck
				c := tc.h0
				if r >= 2 {
					c = tc.h1
				}
				wg.Go(func() {
					for _, w := range []call{tc.h0, tc.h1} {
						if !tc.warm {
							break
						}
						if errs[r] = hostCall(ctx, h, w.op, backend.Float32, w.count, 1, false); errs[r] != nil {
							return
						}
					}
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
