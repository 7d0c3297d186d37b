//go:build cuda

package cuda

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// closeWithAbort makes TestGPUCloseLetsLatePeerFinish release rank 0 with
// Abort instead of Close, which must make it fail: run it once so to see
// that the test can.
var closeWithAbort = flag.Bool("gpu.close-with-abort", false,
	"TestGPUCloseLetsLatePeerFinish releases rank 0 with Abort (the test must then fail)")

// TestGPUCloseLetsLatePeerFinish: Close keeps ncclCommDestroy's semantics
// on GPUs. Rank 0 enqueues a one-shot all-reduce and closes its comm at
// once; rank 1 makes the same call latePeer later. Rank 0's kernel is
// still waiting for rank 1 when Close runs, so Close must let it finish
// (the frees wait for it) rather than end it: both ranks' outputs hold the
// sum and both streams synchronize without error. Two GPUs, one rank
// each (ranks sharing a device share one context, where rank 0's frees
// would hold up rank 1's launch).
func TestGPUCloseLetsLatePeerFinish(t *testing.T) {
	const world, count, latePeer = 2, 4096, 300 * time.Millisecond
	b := openGPU(t)
	ctx := timeout(t)
	if n, err := b.DeviceCount(ctx); err != nil || n < world {
		t.Skipf("needs %d GPUs: %d, %v", world, n, err)
	}
	st := store.NewMem()
	t.Cleanup(func() { st.Close() })
	comms := make([]*collective.Comm, world)
	for r := range world {
		dev := r
		c, err := collective.New(st, r, world, collective.Options{Backend: b, Device: &dev, Timeout: 20 * time.Second})
		require.NoError(t, err)
		comms[r] = c
	}
	// The callers' buffers and streams come from device handles of their
	// own, as a program's do: the comm's goes with the comm.
	streams := make([]backend.Stream, world)
	bufs := make([]backend.Allocation, world)
	devs := make([]backend.Device, world)
	for r := range world {
		devs[r] = openDevice(t, b, r)
		var err error
		bufs[r], err = devs[r].Alloc(ctx, count*4)
		require.NoError(t, err)
		closeLater(t, bufs[r])
		streams[r], err = devs[r].NewStream(ctx)
		require.NoError(t, err)
		closeLater(t, streams[r])
		in := make([]byte, count*4)
		for i := range count {
			binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(r+1)))
		}
		require.NoError(t, devs[r].CopyToDevice(ctx, bufs[r].Ptr(), in))
	}
	require.NoError(t, eachRank(world, func(r int) error { return comms[r].Rendezvous(ctx) }))
	released := make([]time.Duration, world)
	require.NoError(t, eachRank(world, func(r int) error {
		c := comms[r]
		if r == 1 {
			time.Sleep(latePeer)
		}
		// No deadline on the call: the kernel waits up to the comm's timeout.
		w, err := c.AllReduce(context.WithoutCancel(ctx), streams[r], bufs[r].Ptr(), count, backend.Float32, backend.Sum, collective.OneShot)
		if err != nil {
			return fmt.Errorf("all-reduce: %w", err)
		}
		if err := w.Close(); err != nil {
			return err
		}
		start := time.Now()
		release := c.Close
		if r == 0 && *closeWithAbort {
			release = c.Abort
		}
		if err := release(); err != nil {
			return fmt.Errorf("closing the comm: %w", err)
		}
		released[r] = time.Since(start)
		if err := streams[r].Synchronize(ctx); err != nil {
			return fmt.Errorf("the call's stream after Close: %w", err)
		}
		out := make([]byte, count*4)
		if err := devs[r].CopyFromDevice(ctx, out, bufs[r].Ptr()); err != nil {
			return err
		}
		for i := range count {
			if v := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); v != 3 {
				return fmt.Errorf("element %d is %v after Close, want 3 (1 + 2)", i, v)
			}
		}
		return nil
	}))
	t.Logf("rank 0's Close took %v (its peer called %v later), rank 1's %v", released[0], latePeer, released[1])
}
