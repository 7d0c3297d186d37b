//go:build linux

package symmetric_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/symmetric"
	"github.com/intranode/intranode/symmetric/store"
)

// rendezvousAll runs one symmetric rendezvous per device in devs, each
// rank a goroutine, and returns every rank's memory and error.
func rendezvousAll(t *testing.T, b backend.Backend, devs []int, opts func(rank int) []symmetric.Option) ([]*symmetric.Memory, []error) {
	t.Helper()
	mems, errs, _ := rendezvousSized(t, b, devs, func(int) int { return 4096 }, opts)
	return mems, errs
}

// rendezvousSized is rendezvousAll with a buffer of size(rank) bytes on
// each rank; it also returns the devices it opened (nil where Open
// failed), which the test's cleanup closes.
func rendezvousSized(t *testing.T, b backend.Backend, devs []int, size func(rank int) int,
	opts func(rank int) []symmetric.Option) ([]*symmetric.Memory, []error, []backend.Device) {
	t.Helper()
	ctx := t.Context()
	st := store.NewMem()
	t.Cleanup(func() { st.Close() })
	world := len(devs)
	mems := make([]*symmetric.Memory, world)
	errs := make([]error, world)
	opened := make([]backend.Device, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev, err := b.Open(ctx, devs[r])
			if err != nil {
				errs[r] = err
				return
			}
			opened[r] = dev
			t.Cleanup(func() { dev.Close() })
			var o []symmetric.Option
			if opts != nil {
				o = opts(r)
			}
			blk, err := symmetric.Alloc(ctx, b, dev, size(r), o...)
			if err != nil {
				errs[r] = err
				return
			}
			mems[r], errs[r] = blk.Rendezvous(ctx, "peers", symmetric.GroupInfo{Rank: r, World: world, Store: st})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range mems {
			if m != nil {
				m.Close()
			}
		}
	})
	return mems, errs, opened
}

func TestRendezvousRefusesBrokenPeerAccess(t *testing.T) {
	tests := []struct {
		name   string
		broken [][2]int
		devs   []int
		pairs  []string // every rank's error names each
	}{
		{"world 2, both directions", [][2]int{{0, 1}, {1, 0}}, []int{0, 1},
			[]string{"device 0 cannot access device 1 (rank 0 → rank 1)", "device 1 cannot access device 0 (rank 1 → rank 0)"}},
		{"world 2, one direction", [][2]int{{1, 0}}, []int{0, 1},
			[]string{"device 1 cannot access device 0 (rank 1 → rank 0)"}},
		{"world 4, ranks 2 and 3 see no failure of their own", [][2]int{{2, 3}}, []int{3, 2, 1, 0},
			[]string{"device 2 cannot access device 3 (rank 1 → rank 0)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := fake.New(fake.WithDevices(4), fake.WithBrokenP2P(tc.broken...))
			require.NoError(t, err)
			defer b.Close()
			mems, errs := rendezvousAll(t, b, tc.devs, nil)
			for r, err := range errs {
				require.ErrorIs(t, err, symmetric.ErrPeerAccess, "rank %d", r)
				require.Nil(t, mems[r])
				for _, p := range tc.pairs {
					require.ErrorContains(t, err, p, "rank %d", r)
				}
				require.ErrorContains(t, err, "write through the peer mapping read back 0x00 at byte 0, want 0xa5 (fake.WithBrokenP2P)")
				require.Equal(t, errs[0].Error(), err.Error(), "every rank gives the same verdict")
			}
			// Devices without a broken pair still rendezvous.
			clean := []int{}
			for d := range 4 {
				ok := true
				for _, p := range tc.broken {
					ok = ok && p[0] != d && p[1] != d
				}
				if ok {
					clean = append(clean, d)
				}
			}
			if len(clean) >= 2 {
				mems, errs := rendezvousAll(t, b, clean, nil)
				for r := range clean {
					require.NoError(t, errs[r])
					require.NotNil(t, mems[r])
				}
			}
		})
	}
}

func TestPeerCheckScope(t *testing.T) {
	b, err := fake.New(fake.WithDevices(4), fake.WithBrokenP2P([2]int{0, 2}, [2]int{2, 0}))
	require.NoError(t, err)
	defer b.Close()

	// Ranks 0 and 2 never reach each other's memory: not checked.
	skip := func(r int) []symmetric.Option {
		return []symmetric.Option{symmetric.WithPeerCheck(func(peer int) bool { return r^peer != 2 })}
	}
	_, errs := rendezvousAll(t, b, []int{0, 1, 2, 3}, skip)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}

	// Ranks sharing a device are never checked against each other.
	overlap := func(int) []symmetric.Option { return []symmetric.Option{symmetric.WithAllowOverlap(true)} }
	_, errs = rendezvousAll(t, b, []int{0, 0}, overlap)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}

	// Without a link the driver already says no; the reason says so.
	ring, err := fake.New(fake.WithDevices(4), fake.WithTopology(fake.PresetRing))
	require.NoError(t, err)
	defer ring.Close()
	_, errs = rendezvousAll(t, ring, []int{0, 2}, nil)
	for r, err := range errs {
		require.ErrorIs(t, err, symmetric.ErrPeerAccess, "rank %d", r)
		require.ErrorContains(t, err, `devices 0 and 2 are not linked in the fake's "ring" topology`)
	}
}

// noTester hides the fake's PeerTest, as a backend without one.
type noTester struct{ backend.Backend }

func TestPeerReasonWithoutTester(t *testing.T) {
	b, err := fake.New(fake.WithDevices(2), fake.WithBrokenP2P([2]int{0, 1}))
	require.NoError(t, err)
	defer b.Close()
	_, errs := rendezvousAll(t, noTester{b}, []int{0, 1}, nil)
	for r, err := range errs {
		require.ErrorIs(t, err, symmetric.ErrPeerAccess, "rank %d", r)
		require.ErrorContains(t, err, "device 0 cannot access device 1 (rank 0 → rank 1): backend fake reports no peer access")
	}
}

// A rendezvous that fails releases what it took, the kernel module it
// loads beside the exchanges included: each rank's device then closes with
// nothing left open. The ranks here disagree on the buffer size.
func TestFailedRendezvousLeavesNothingOpen(t *testing.T) {
	b, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	defer b.Close()
	_, errs, devs := rendezvousSized(t, b, []int{0, 1}, func(r int) int { return 4096 * (r + 1) }, nil)
	for r, dev := range devs {
		require.ErrorIs(t, errs[r], symmetric.ErrSizeMismatch, "rank %d", r)
		require.NoError(t, dev.Close(), "rank %d: the device closed with something still open", r)
	}
}
