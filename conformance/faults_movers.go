package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

// Faults of the data-movement collectives: a rank that dies during one, a
// rank that never calls one, and ranks whose calls differ (another
// collective, count, dtype, reduce op or root). Each trial draws the
// collective, so repeated trials cover all four.
func init() {
	register(
		Case{Name: "faults/kill-movers", MinWorld: 2, Run: caseKillMovers,
			Fault: &Fault{Summary: "killed rank during a reduce-scatter, all-gather, broadcast or all-to-all", Role: VictimDies,
				Processes: true}},
		Case{Name: "faults/stall-movers", MinWorld: 2, Run: caseStallMovers,
			Fault: &Fault{Summary: "stalled rank (never calls the reduce-scatter, all-gather, broadcast or all-to-all)",
				Role: VictimStalls}},
		Case{Name: "faults/mismatched-movers", MinWorld: 2, Run: caseMismatchedMovers,
			Fault: &Fault{Summary: "ranks make different reduce-scatter, all-gather, broadcast or all-to-all calls",
				Role:   VictimNone,
				Expect: "ended in ErrMismatch on every rank, outputs untouched, within deadline+" + FaultGrace.String()}},
	)
}

// faultMover is a trial's data-movement call: collective, count per rank
// (up to what one launch moves with the fault buffer) and root.
func faultMover(p FaultPlan, world int) moverCall {
	op := movers[p.Rand.IntN(len(movers))]
	limit := faultBuffer / backend.Float32.Size()
	if op == collective.OpReduceScatter || op == collective.OpAllToAll {
		limit /= world
	}
	return moverCall{op: op, algo: collective.Direct, dtype: backend.Float32, red: backend.Sum,
		count: 1 + p.Rand.IntN(limit), root: p.Rand.IntN(world), outPlace: true}
}

// caseKillMovers: after a few good calls the victim starts one more and
// dies during it.
func caseKillMovers(ctx context.Context, e *Env) error {
	p := e.Plan()
	m := faultMover(p, e.World)
	good := p.Rand.IntN(3)
	delay := time.Duration(p.Rand.Int64N(int64(2 * time.Millisecond)))
	if e.Rank != p.Victim {
		c, err := faultComm(ctx, e, e.Store)
		if err != nil {
			return err
		}
		return survive(ctx, e, c, -1, func(i int) (string, func(context.Context) error) {
			if i == 0 {
				return "rendezvous", c.Rendezvous
			}
			return fmt.Sprintf("call %d: %v", i, m), func(ctx context.Context) error {
				m.seed = i
				return moverOnce(ctx, e, c, m)
			}
		})
	}
	c, err := victimRendezvous(ctx, e)
	if err != nil {
		return err
	}
	for i := range good {
		m.seed = i + 1
		if a := try(ctx, m.op.String(), setupDeadline(e), func(ctx context.Context) error { return moverOnce(ctx, e, c, m) }); a.err != nil {
			return fmt.Errorf("the victim's %v %d failed before it died: %w", m.op, i+1, a.err)
		}
	}
	m.seed = good + 1
	go func() { _ = moverOnce(ctx, e, c, m) }()
	time.Sleep(delay)
	return die(e)
}

// caseStallMovers: the victim never makes the call. The kernel's own
// deadline ends the wait (the call's context carries none, so the kernel
// gets the comm's timeout, the fault deadline), and its status word names
// the victim.
func caseStallMovers(ctx context.Context, e *Env) error {
	m := faultMover(e.Plan(), e.World)
	m.seed, m.kernelDeadline = 1, e.FaultDeadline
	return stallAfterRendezvous(ctx, e, m.String(), func(c *collective.Comm) func(context.Context) error {
		return func(ctx context.Context) error { return moverOnce(ctx, e, c, m) }
	})
}

// caseMismatchedMovers: after an agreeing call, the ranks make one that
// differs on some of them. Every rank must get ErrMismatch within the
// deadline with its output untouched (no partial or wrong result).
func caseMismatchedMovers(ctx context.Context, e *Env) (err error) {
	p := e.Plan()
	agreed := faultMover(p, e.World)
	// Ranks at or above cut make another call; there is always one.
	cut := 1 + p.Rand.IntN(e.World-1)
	other := agreed
	switch p.Rand.IntN(4) {
	case 0:
		for other.op == agreed.op {
			other = faultMover(p, e.World)
		}
	case 1:
		other.count = agreed.count - 1
		if other.count == 0 {
			other.count = 2
		}
	case 2:
		other.root = (agreed.root + 1) % e.World
		other.op = collective.OpBroadcast
		agreed.op = collective.OpBroadcast
	default:
		other.dtype = backend.Int32
	}
	mine := agreed
	if e.Rank >= cut {
		mine = other
	}
	c, sctx, cancel, err := rendezvousForFault(ctx, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer closeInto(&err, c)
	agreed.seed = 1
	if err := moverOnce(sctx, e, c, agreed); err != nil {
		return fmt.Errorf("the agreeing call: %w", err)
	}
	// The device bounds the call by the fault deadline, as the mismatched
	// all-reduce's is: a rank on LL lines facing a peer on another path
	// (which writes no lines) learns of the difference only at its
	// deadline, and this call's context, the case's, would have made that
	// the case's whole remaining time (40 s on 4×H100, thirteenth session;
	// docs/RELIABILITY.md, "Problems found on the way").
	mine.seed, mine.untouched, mine.kernelDeadline = 2, true, e.FaultDeadline
	start := time.Now()
	err = moverOnce(ctx, e, c, mine)
	took := time.Since(start)
	switch {
	case err == nil:
		return fmt.Errorf("%v on rank %d against %v on ranks >= %d: no error", mine, e.Rank, other, cut)
	case !errors.Is(err, collective.ErrMismatch):
		return fmt.Errorf("%v on rank %d against %v on ranks >= %d: got %w, want ErrMismatch", mine, e.Rank, other, cut, err)
	case took > e.FaultDeadline+FaultGrace:
		return fmt.Errorf("ErrMismatch after %v, beyond the deadline %v + %v", took, e.FaultDeadline, FaultGrace)
	}
	return nil
}
