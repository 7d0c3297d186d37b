package ipc

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// rankResult is what one rank of an in-process collective saw; checks run on
// the test goroutine.
type rankResult struct {
	own      int
	fds      []int
	contents []string
	err      error
}

func TestAllGatherFD(t *testing.T) {
	const rounds = 3
	for _, n := range []int{2, 3, 4, 8} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			chs, pids := newGroup(t, n)
			ctx := testCtx(t)
			for round := range rounds {
				results := make([]rankResult, n)
				var wg sync.WaitGroup
				for r := range n {
					fd := memfdWith(t, fmt.Sprintf("rank %d round %d", r, round))
					results[r].own = fd
					wg.Go(func() {
						// Every round reuses the tag: rounds match in order.
						results[r].fds, results[r].err = chs[r].AllGatherFD(ctx, r, pids, "ag", fd)
					})
				}
				wg.Wait()
				for r, res := range results {
					require.NoError(t, res.err, "rank %d", r)
					require.Len(t, res.fds, n)
					require.Equal(t, res.own, res.fds[r], "a rank's own entry is its own descriptor")
					for peer, fd := range res.fds {
						require.Equal(t, fmt.Sprintf("rank %d round %d", peer, round), readFD(t, fd), "rank %d's view of rank %d", r, peer)
						if peer != r {
							require.True(t, isCloseOnExec(t, fd))
						}
					}
					closeFDs(res.fds)
				}
			}
		})
	}
}

func TestBroadcastFD(t *testing.T) {
	tests := []struct {
		world, root int
	}{
		{2, 0}, {2, 1}, {4, 0}, {4, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d ranks from %d", tt.world, tt.root), func(t *testing.T) {
			chs, pids := newGroup(t, tt.world)
			ctx := testCtx(t)
			rootFD := memfdWith(t, "root data")
			defer unix.Close(rootFD)
			results := make([]rankResult, tt.world)
			var wg sync.WaitGroup
			for r := range tt.world {
				fd := -1
				if r == tt.root {
					fd = rootFD
				}
				wg.Go(func() {
					got, err := chs[r].BroadcastFD(ctx, r, tt.root, pids, "bc", fd)
					results[r].fds, results[r].err = []int{got}, err
				})
			}
			wg.Wait()
			for r, res := range results {
				require.NoError(t, res.err, "rank %d", r)
				got := res.fds[0]
				require.Equal(t, "root data", readFD(t, got))
				if r == tt.root {
					require.Equal(t, rootFD, got, "root gets its own descriptor back")
					continue
				}
				require.NotEqual(t, rootFD, got)
				require.True(t, isCloseOnExec(t, got))
				require.NoError(t, unix.Close(got))
			}
		})
	}
}

func TestCollectiveTimeoutNamesPeer(t *testing.T) {
	absent := fakePIDBase + 2 // in the group, never opens a channel
	tests := []struct {
		name string
		// run calls the collective on every participating rank of a group
		// of three in-process channels (rank 2 uses pid absent when the
		// case says it never binds) and returns rank 0's error.
		run     func(t *testing.T, chs []*Channel, pids []int) error
		unbound bool
		want    []string
		notWant []string
	}{
		{
			name: "all-gather, rank 2 bound but silent",
			run: func(t *testing.T, chs []*Channel, pids []int) error {
				return allGatherRanks(t, chs[:2], pids)
			},
			want:    []string{fmt.Sprintf("no descriptor arrived from rank 2 (pid %d)", pids3()[2])},
			notWant: []string{"rank 1", "could not reach"},
		},
		{
			name:    "all-gather, rank 2 never binds",
			unbound: true,
			run: func(t *testing.T, chs []*Channel, pids []int) error {
				return allGatherRanks(t, chs[:2], pids)
			},
			want: []string{
				fmt.Sprintf("no descriptor arrived from rank 2 (pid %d)", absent),
				fmt.Sprintf("could not reach rank 2 (pid %d)", absent),
			},
			notWant: []string{"rank 1 ("},
		},
		{
			name: "broadcast, root silent",
			run: func(t *testing.T, chs []*Channel, pids []int) error {
				_, err := chs[0].BroadcastFD(shortCtx(t), 0, 1, pids, "bc", -1)
				return err
			},
			want: []string{fmt.Sprintf("no descriptor arrived from rank 1 (pid %d)", pids3()[1])},
		},
		{
			name:    "broadcast, receiver never binds",
			unbound: true,
			run: func(t *testing.T, chs []*Channel, pids []int) error {
				fd := memfdWith(t, "root")
				defer unix.Close(fd)
				_, err := chs[0].BroadcastFD(shortCtx(t), 0, 0, pids, "bc", fd)
				return err
			},
			want:    []string{fmt.Sprintf("could not reach rank 2 (pid %d)", absent)},
			notWant: []string{"rank 1 ("},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chs, pids := newGroup(t, 3)
			if tt.unbound {
				require.NoError(t, chs[2].Close())
				pids[2] = absent
				chs[0].SetPeers(pids)
				chs[1].SetPeers(pids)
			}
			err := tt.run(t, chs, pids)
			require.ErrorIs(t, err, backend.ErrTimeout)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
			for _, w := range tt.notWant {
				require.NotContains(t, err.Error(), w)
			}
		})
	}
}

// pids3 is the pids newGroup gives a group of three.
func pids3() []int { return []int{fakePIDBase, fakePIDBase + 1, fakePIDBase + 2} }

// allGatherRanks runs AllGatherFD with a short deadline on the ranks whose
// channels are given and returns rank 0's error; every rank must fail.
func allGatherRanks(t *testing.T, chs []*Channel, pids []int) error {
	errs := make([]error, len(chs))
	var wg sync.WaitGroup
	for r, ch := range chs {
		fd := memfdWith(t, "x")
		wg.Go(func() {
			defer unix.Close(fd)
			var fds []int
			fds, errs[r] = ch.AllGatherFD(shortCtx(t), r, pids, "ag", fd)
			closeFDs(fds)
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
	}
	return errs[0]
}

func TestCollectivesRejectBadArguments(t *testing.T) {
	chs, pids := newGroup(t, 3)
	fd := memfdWith(t, "x")
	defer unix.Close(fd)
	closed := memfdWith(t, "closed")
	require.NoError(t, unix.Close(closed))
	ctx := testCtx(t)
	ag := func(rank int, pids []int, tag string, fd int) func() error {
		return func() error { _, err := chs[0].AllGatherFD(ctx, rank, pids, tag, fd); return err }
	}
	bc := func(rank, root int, fd int) func() error {
		return func() error { _, err := chs[0].BroadcastFD(ctx, rank, root, pids, "bc", fd); return err }
	}

	tests := []struct {
		name string
		call func() error
	}{
		{"all-gather rank out of range", ag(3, pids, "t", fd)},
		{"all-gather negative rank", ag(-1, pids, "t", fd)},
		{"all-gather rank is another pid", ag(1, pids, "t", fd)},
		{"all-gather duplicate pid", ag(0, []int{pids[0], pids[1], pids[1]}, "t", fd)},
		{"all-gather non-peer pid", ag(0, []int{pids[0], fakePIDBase + 77}, "t", fd)},
		{"all-gather negative descriptor", ag(0, pids, "t", -1)},
		{"all-gather closed descriptor", ag(0, pids, "t", closed)},
		{"all-gather long tag", ag(0, pids, strings.Repeat("t", MaxTagLen+1), fd)},
		{"broadcast root out of range", bc(0, 3, fd)},
		{"broadcast negative root descriptor", bc(0, 0, -1)},
		{"broadcast closed root descriptor", bc(0, 0, closed)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			require.NotErrorIs(t, err, backend.ErrTimeout, "a bad argument fails at once")
		})
	}
	// Nothing was sent: no descriptor sits in any peer's queue.
	for _, ch := range chs[1:] {
		require.False(t, ch.queued(pids[0], "t"))
		require.False(t, ch.queued(pids[0], "bc"))
	}
}
