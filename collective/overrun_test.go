package collective_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
)

// stuckStream is a stream whose work never finishes until released: a
// vendor library's kernel waiting for a peer that died, which (unlike the
// comm's kernels) has no deadline of its own.
type stuckStream struct {
	backend.Stream
	released chan struct{}
}

func (s *stuckStream) Synchronize(ctx context.Context) error {
	select {
	case <-s.released:
		return nil
	case <-ctx.Done():
		return backend.Errorf(backend.CodeTimeout, "stuck stream: %v", ctx.Err())
	}
}

// abortingVendor is a vendorBackend whose ReleaseFallback ends the stuck
// work, as ncclCommAbort ends NCCL's kernels.
type abortingVendor struct {
	*vendorBackend
	stuck *stuckStream
}

func (v *abortingVendor) ReleaseFallback(c *collective.Comm) error {
	if err := v.vendorBackend.ReleaseFallback(c); err != nil {
		return err
	}
	select {
	case <-v.stuck.released:
	default:
		close(v.stuck.released)
	}
	return nil
}

// TestOverrunAbortsVendor: a fallback call whose work is still running at
// its deadline fails the comm and aborts the vendor communicator at once,
// so the stream drains and nothing that frees memory waits for it forever
// (before, the abort came only with Close, after the frees that wait).
func TestOverrunAbortsVendor(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	v := &abortingVendor{vendorBackend: newVendorBackend(t, fake.WithDevices(2))}
	comms, errs := rendezvousDevices(t, ctx, v, []int{0, 1})
	for _, err := range errs {
		require.NoError(t, err)
	}
	c := comms[0]
	key := c.GroupName() + "/0"
	s, err := c.Device().NewStream(ctx)
	require.NoError(t, err)
	defer s.Close()
	buf, err := c.Device().Alloc(ctx, 64)
	require.NoError(t, err)
	defer buf.Close()
	v.stuck = &stuckStream{Stream: s, released: make(chan struct{})}

	// A wait that ends before the call's deadline leaves the comm alone.
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	w, err := c.AllReduce(cctx, v.stuck, buf.Ptr(), 16, backend.Float32, backend.Sum, collective.None)
	require.NoError(t, err)
	early, ecancel := context.WithTimeout(ctx, 50*time.Millisecond)
	require.ErrorIs(t, w.Synchronize(early), backend.ErrTimeout)
	ecancel()
	require.Zero(t, v.count(v.released, key), "a wait shorter than the call's deadline aborts nothing")

	// Past the call's own deadline: the comm fails and the vendor
	// communicator is aborted, which ends the stuck work.
	short, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	w, err = c.AllReduce(short, v.stuck, buf.Ptr(), 16, backend.Float32, backend.Sum, collective.None)
	require.NoError(t, err)
	require.ErrorIs(t, w.Synchronize(short), backend.ErrTimeout)
	require.Equal(t, 1, v.count(v.released, key))
	require.NoError(t, v.stuck.Synchronize(ctx), "the abort ended the stuck work")
	_, err = c.AllReduce(ctx, s, buf.Ptr(), 16, backend.Float32, backend.Sum, collective.None)
	require.ErrorIs(t, err, collective.ErrCommFailed)
}
