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
	"github.com/intranode/intranode/internal/numeric"
	_ "github.com/intranode/intranode/kernels/cpu" // the fake backend's kernels
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

// allReduceCheck all-reduces count elements of pattern data on the comm
// and checks the result exactly.
func allReduceCheck(ctx context.Context, c *collective.Comm, d backend.DType, algo collective.Algo, count, seed int) error {
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
	w, err := c.AllReduce(ctx, s, buf.Ptr(), count, d, backend.Sum, algo)
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
	numeric.Expected(d, backend.Sum, want, count, c.World(), seed)
	if wrong, first := numeric.Compare(d, host, want, count); wrong > 0 {
		return fmt.Errorf("%v %v count %d: %d elements wrong, first %v", algo, d, count, wrong, first)
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
