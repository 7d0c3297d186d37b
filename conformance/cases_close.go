package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

func init() {
	register(Case{Name: "collective/close-during-call", MinWorld: 2, Run: caseCloseDuringCall})
}

// closeCallCount is the all-reduce of caseCloseDuringCall: small, since
// the case is about the wait, not the data.
const closeCallCount = 4099

// caseCloseDuringCall: every rank but the last launches an all-reduce
// whose kernel waits for the last with the comm's whole timeout ahead,
// then closes the comm while that kernel waits (as ncclCommAbort does
// under a hung call). The last rank makes the same call into a stream
// capture that it never replays: it takes part in the launch (ranks that
// share a device meet there) but its kernel never runs. Close must end
// the waiting kernel rather than wait out its deadline: it returns, and so
// does the kernel, within a quarter of the case's timeout, well before the
// kernel's own deadline; the device is still usable after it (a kernel
// that outlived the memory it reads would have faulted), and nothing
// outside the caller's buffer was written.
func caseCloseDuringCall(ctx context.Context, e *Env) (err error) {
	victim := e.World - 1
	c, err := newComm(ctx, e, quickAllReduceBuffer)
	if err != nil {
		return err
	}
	// The caller's buffer and stream come from a device handle of its own,
	// as a program's do: the comm's goes with the comm.
	dev, err := e.Backend.Open(ctx, c.Device().Index())
	if err != nil {
		return errors.Join(err, c.Close())
	}
	defer dev.Close()
	in, _, err := newPatterned(ctx, e, dev, backend.Float32, closeCallCount, 1)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	defer in.close()
	s, err := dev.NewStream(ctx)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	defer s.Close()
	if e.Rank == victim {
		return errors.Join(neverRun(ctx, c, s, in.ptr()), stallUntilDone(ctx, e, victim), c.Close())
	}
	defer func() { err = errors.Join(err, markDone(ctx, e)) }()
	// No deadline on the call: its kernel waits for the comm's timeout,
	// e.Timeout, longer than anything below allows.
	w, err := c.AllReduce(context.WithoutCancel(ctx), s, in.ptr(), closeCallCount, backend.Float32, backend.Sum, collective.OneShot)
	if err != nil {
		return errors.Join(fmt.Errorf("all-reduce: %w", err), c.Close())
	}
	defer w.Close()
	time.Sleep(100 * time.Millisecond) // the kernel is waiting for the victim by now
	bound := e.Timeout / 4
	took, err := closeTimed(c)
	if err != nil {
		return fmt.Errorf("closing the comm during a call: %w", err)
	}
	if took > bound {
		return fmt.Errorf("closing the comm during a call took %v: it waited for the kernel's deadline (%v) instead of ending it", took, e.Timeout)
	}
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := s.Synchronize(sctx); err != nil {
		return fmt.Errorf("the call's stream after the comm was closed (closing took %v): %w", took, err)
	}
	// The device still works, and the call wrote only its own buffer.
	if _, err := in.read(ctx); err != nil {
		return fmt.Errorf("reading the call's buffer after the comm was closed: %w", err)
	}
	return in.checkCanaries(ctx)
}

// neverRun makes caseCloseDuringCall's all-reduce into a capture of s and
// drops the graph unlaunched.
func neverRun(ctx context.Context, c *collective.Comm, s backend.Stream, buf backend.DevicePtr) error {
	if err := s.BeginCapture(); err != nil {
		return err
	}
	w, err := c.AllReduce(context.WithoutCancel(ctx), s, buf, closeCallCount, backend.Float32, backend.Sum, collective.OneShot)
	if err == nil {
		err = w.Close()
	}
	g, cerr := s.EndCapture()
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	return errors.Join(err, g.Close())
}
