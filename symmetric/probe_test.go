//go:build linux

package symmetric_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/symmetric"
)

// mappedBackend is the fake backend asking for the peer-access check
// through the mappings (backend.MappedPeerChecker), as the GPU backends
// do; with misroute, every import yields fresh memory of the importing
// device instead of the peer's: a peer mapping that points somewhere else.
type mappedBackend struct {
	backend.Backend
	misroute bool
}

func (b mappedBackend) CheckPeersThroughMappings() bool { return true }

func (b mappedBackend) Open(ctx context.Context, i int) (backend.Device, error) {
	d, err := b.Backend.Open(ctx, i)
	if err != nil || !b.misroute {
		return d, err
	}
	return misroutedDevice{d}, nil
}

type misroutedDevice struct{ backend.Device }

func (d misroutedDevice) Import(ctx context.Context, h backend.Handle) (backend.Allocation, error) {
	if h.File != nil {
		_ = h.File.Close()
	}
	return d.Alloc(ctx, h.Size)
}

func TestPeerAccessThroughMappings(t *testing.T) {
	for _, world := range []int{2, 4} {
		t.Run("working", func(t *testing.T) {
			fb, devs := fakeDevices(t, world)
			mems, errs := rendezvousAll(t, mappedBackend{Backend: fb}, devs, nil)
			for r := range world {
				require.NoError(t, errs[r], "rank %d", r)
				require.NotNil(t, mems[r])
			}
			// The memory works after the probe: a barrier on a kernel channel.
			barrierAll(t, mems)
		})
		t.Run("misrouted", func(t *testing.T) {
			fb, devs := fakeDevices(t, world)
			_, errs := rendezvousAll(t, mappedBackend{Backend: fb, misroute: true}, devs, func(int) []symmetric.Option {
				return []symmetric.Option{symmetric.WithTimeout(2 * time.Second)}
			})
			for r := range world {
				require.ErrorIs(t, errs[r], symmetric.ErrPeerAccess, "rank %d", r)
				require.Contains(t, errs[r].Error(), "did not arrive", "rank %d", r)
			}
		})
	}
}

func barrierAll(t *testing.T, mems []*symmetric.Memory) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	errc := make(chan error, len(mems))
	for _, m := range mems {
		go func() { errc <- m.Barrier(ctx, 0) }()
	}
	var errs []error
	for range mems {
		errs = append(errs, <-errc)
	}
	require.NoError(t, errors.Join(errs...))
}

// fakeDevices is a fake backend of n devices, closed with the test, and
// the list of them.
func fakeDevices(t *testing.T, n int) (backend.Backend, []int) {
	t.Helper()
	fb, err := fake.New(fake.WithDevices(n))
	require.NoError(t, err)
	t.Cleanup(func() { fb.Close() })
	devs := make([]int, n)
	for i := range devs {
		devs[i] = i
	}
	return fb, devs
}
