package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric"
	"github.com/intranode/intranode/symmetric/ipc"
	"github.com/intranode/intranode/symmetric/store"
)

// The faults group: what a group does when one of its ranks dies, stalls,
// or is attacked. Every case is a fault case (run with Config.Faults, as
// many times as Config.Trials), and every case checks the promise the
// issue "never hang, never lose, let no one in" makes: a surviving rank's
// operation ends in an error within its deadline plus FaultGrace, that
// error is a timeout or peer failure (never a wrong result), and Close
// returns within FaultCloseLimit.
func init() {
	kill := func(summary string, parent bool) *Fault {
		return &Fault{Summary: summary, Role: VictimDies, Processes: true, ParentKill: parent}
	}
	stall := func(summary string) *Fault { return &Fault{Summary: summary, Role: VictimStalls} }
	// Not a fault case (it runs in every run): a hung call's comm aborted.
	register(Case{Name: "collective/abort-during-call", MinWorld: 2, Run: caseAbortDuringCall})
	register(
		Case{Name: "faults/kill-rendezvous", MinWorld: 2, Run: caseKillRendezvous,
			Fault: kill("killed rank during rendezvous", false)},
		Case{Name: "faults/kill-after-handshake", MinWorld: 2, Run: caseKillAfterHandshake,
			Fault: kill("killed rank after the handshake, in the rendezvous", false)},
		Case{Name: "faults/kill-barrier", MinWorld: 2, Run: caseKillBarrier,
			Fault: kill("killed rank during barrier", false)},
		Case{Name: "faults/kill-allreduce", MinWorld: 2, Run: caseKillAllReduce,
			Fault: kill("killed rank during all-reduce", false)},
		Case{Name: "faults/kill-anytime", MinWorld: 2, Run: caseKillAnytime,
			Fault: kill("rank killed by the harness at a random moment", true)},
		Case{Name: "faults/stall-rendezvous", MinWorld: 2, Run: caseStallRendezvous,
			Fault: stall("stalled rank (never joins rendezvous)")},
		Case{Name: "faults/stall-barrier", MinWorld: 2, Run: caseStallBarrier,
			Fault: stall("stalled rank (never calls barrier)")},
		Case{Name: "faults/stall-allreduce", MinWorld: 2, Run: caseStallAllReduce,
			Fault: stall("stalled rank (never calls all-reduce)")},
		Case{Name: "faults/bad-store-client", MinWorld: 2, Run: caseBadStoreClient,
			Fault: &Fault{Summary: "garbage and wrong secrets on the TCP store", Role: VictimNone, Processes: true}},
		Case{Name: "faults/foreign-ipc-sender", MinWorld: 2, Run: caseForeignIPCSender,
			Fault: &Fault{Summary: "descriptor sent by a process outside the group", Role: VictimNone, Processes: true}},
		Case{Name: "faults/ipc-name-taken", MinWorld: 2, Needs: backend.CapHandleFD, Run: caseIPCNameTaken,
			Fault: &Fault{Summary: "IPC socket name bound first by another process", Role: VictimFails, Processes: true}},
	)
}

// faultBuffer is the symmetric buffer of fault cases: small, since they
// are about control flow, not bandwidth.
const faultBuffer = 256 << 10

// setupDeadline bounds the steps of a fault case that must succeed (a
// rendezvous before the fault strikes later): long enough not to be
// mistaken for the fault on a loaded machine.
func setupDeadline(e *Env) time.Duration { return max(4*e.FaultDeadline, 10*time.Second) }

// faultComm creates this rank's comm over st; it does not rendezvous.
func faultComm(ctx context.Context, e *Env, st store.Store) (*collective.Comm, error) {
	opts, err := commOptions(ctx, e, faultBuffer)
	if err != nil {
		return nil, err
	}
	opts.Timeout = e.FaultDeadline
	return collective.New(st, e.Rank, e.World, opts)
}

// attempt is one operation of a fault case, run under its own deadline.
type attempt struct {
	op       string
	deadline time.Duration
	elapsed  time.Duration
	err      error
}

func try(ctx context.Context, op string, deadline time.Duration, run func(context.Context) error) attempt {
	octx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	err := run(octx)
	return attempt{op: op, deadline: deadline, elapsed: time.Since(start), err: err}
}

// report sends a's outcome, and how long closing took after it, to the
// harness.
func (a attempt) report(e *Env, closing time.Duration) {
	r := FaultReport{Op: a.op, Deadline: a.deadline, Elapsed: a.elapsed, Close: closing}
	if a.err != nil {
		r.Err = a.err.Error()
	}
	e.ReportFault(r)
}

// check requires a's error to be what a dead, absent or refused peer must
// cause: a timeout or a peer failure, never a wrong result; with missing
// >= 0 it must also name that rank as the one that did not arrive.
func (a attempt) check(missing int) error {
	if !errors.Is(a.err, backend.ErrTimeout) && !errors.Is(a.err, backend.ErrPeerFailed) {
		return fmt.Errorf("%s failed, but not with a timeout or a peer failure: %w", a.op, a.err)
	}
	if missing >= 0 && !strings.Contains(a.err.Error(), fmt.Sprintf("rank %d did not arrive", missing)) {
		return fmt.Errorf("%s failed without naming rank %d as the one missing: %w", a.op, missing, a.err)
	}
	return nil
}

// closeTimed closes c (a comm, host groups) and says how long that took.
func closeTimed(c io.Closer) (time.Duration, error) {
	start := time.Now()
	err := c.Close()
	return time.Since(start), err
}

// survive runs ops on a surviving rank — next(0), next(1), … each under
// the fault deadline — until one fails, next returns no operation, or half
// the case's time is spent (the fault went unnoticed). It then closes c,
// reports the failing operation and the Close, and checks the error (see
// attempt.check).
func survive(ctx context.Context, e *Env, c io.Closer, missing int,
	next func(i int) (string, func(context.Context) error)) error {
	return surviveFrom(ctx, e, c, missing, e.FaultDeadline, next)
}

// surviveFrom is survive with next(0) under the deadline first: for an
// operation the fault cannot come before, such as the rendezvous of a
// case whose victim dies only after its own.
func surviveFrom(ctx context.Context, e *Env, c io.Closer, missing int, first time.Duration,
	next func(i int) (string, func(context.Context) error)) error {
	start := time.Now()
	for i := 0; ; i++ {
		op, run := next(i)
		if run == nil || time.Since(start) > e.Timeout/2 {
			closing, cerr := closeTimed(c)
			attempt{op: "every operation", deadline: e.FaultDeadline}.report(e, closing)
			return cerr
		}
		deadline := e.FaultDeadline
		if i == 0 {
			deadline = first
		}
		a := try(ctx, op, deadline, run)
		if a.err == nil {
			continue
		}
		closing, cerr := closeTimed(c)
		a.report(e, closing)
		if err := a.check(missing); err != nil {
			return err
		}
		if cerr != nil {
			return fmt.Errorf("closing the comm after %s failed: %w", a.op, cerr)
		}
		return nil
	}
}

// barriers is a survivor's plan: rendezvous, then barriers.
func barriers(c *collective.Comm) func(int) (string, func(context.Context) error) {
	return func(i int) (string, func(context.Context) error) {
		switch {
		case i == 0:
			return "rendezvous", c.Rendezvous
		default:
			return fmt.Sprintf("barrier %d", i), func(ctx context.Context) error { return c.Barrier(ctx) }
		}
	}
}

// allReduces is a survivor's plan: rendezvous, then all-reduces checked
// exactly (a wrong result fails the case, not the trial's fault check).
func allReduces(e *Env, c *collective.Comm, algo collective.Algo, count int) func(int) (string, func(context.Context) error) {
	return func(i int) (string, func(context.Context) error) {
		switch {
		case i == 0:
			return "rendezvous", c.Rendezvous
		default:
			return fmt.Sprintf("all-reduce %d (%v, %d floats)", i, algo, count), func(ctx context.Context) error {
				return allReduceOnce(ctx, e, c, algo, backend.Float32, backend.Sum, count, i, false)
			}
		}
	}
}

// faultAllReduce is a trial's choice of all-reduce: algorithm and size.
func faultAllReduce(p FaultPlan) (collective.Algo, int) {
	algo := []collective.Algo{collective.OneShot, collective.TwoShot}[p.Rand.IntN(2)]
	return algo, 1 + p.Rand.IntN(faultBuffer/backend.Float32.Size())
}

// killingStore kills its process at its call number at (counted from 0),
// just before the call reaches the store or just after it returns: a rank
// dying at a chosen point of a store-driven rendezvous.
// With onKey set it instead kills its process just before the first call
// on a key onKey accepts.
type killingStore struct {
	store.Store
	e     *Env
	at    int64
	after bool
	onKey func(key string) bool
	calls atomic.Int64
}

func (s *killingStore) do(keys []string, run func() error) error {
	if s.onKey != nil {
		for _, k := range keys {
			if s.onKey(k) {
				return die(s.e)
			}
		}
		return run()
	}
	n := s.calls.Add(1) - 1
	if n == s.at && !s.after {
		return die(s.e)
	}
	err := run()
	if n == s.at && s.after {
		return die(s.e)
	}
	return err
}

// Set is Store.Set, killing the process at the chosen call.
func (s *killingStore) Set(ctx context.Context, key string, value []byte) error {
	return s.do([]string{key}, func() error { return s.Store.Set(ctx, key, value) })
}

// Get is Store.Get, killing the process at the chosen call.
func (s *killingStore) Get(ctx context.Context, key string) (v []byte, err error) {
	err = s.do([]string{key}, func() error { v, err = s.Store.Get(ctx, key); return err })
	return v, err
}

// Wait is Store.Wait, killing the process at the chosen call.
func (s *killingStore) Wait(ctx context.Context, keys ...string) error {
	return s.do(keys, func() error { return s.Store.Wait(ctx, keys...) })
}

// Add is Store.Add, killing the process at the chosen call.
func (s *killingStore) Add(ctx context.Context, key string, delta int64) (n int64, err error) {
	err = s.do([]string{key}, func() error { n, err = s.Store.Add(ctx, key, delta); return err })
	return n, err
}

// CompareAndSet is Store.CompareAndSet, killing the process at the chosen
// call.
func (s *killingStore) CompareAndSet(ctx context.Context, key string, expected, desired []byte) (v []byte, err error) {
	err = s.do([]string{key}, func() error { v, err = s.Store.CompareAndSet(ctx, key, expected, desired); return err })
	return v, err
}

// Check is Store.Check, killing the process at the chosen call.
func (s *killingStore) Check(ctx context.Context, keys ...string) (ok bool, err error) {
	err = s.do(keys, func() error { ok, err = s.Store.Check(ctx, keys...); return err })
	return ok, err
}

// Delete is Store.Delete, killing the process at the chosen call.
func (s *killingStore) Delete(ctx context.Context, key string) (ok bool, err error) {
	err = s.do([]string{key}, func() error { ok, err = s.Store.Delete(ctx, key); return err })
	return ok, err
}

// caseKillRendezvous: the victim dies at a random store call of its
// rendezvous (a rendezvous makes at least 3·world+4 of them: counter,
// handshake, memory exchange, barrier, cleanup).
func caseKillRendezvous(ctx context.Context, e *Env) error {
	p := e.Plan()
	at := int64(p.Rand.IntN(3*e.World + 4))
	after := p.Rand.IntN(2) == 1
	if e.Rank != p.Victim {
		c, err := faultComm(ctx, e, e.Store)
		if err != nil {
			return err
		}
		return survive(ctx, e, c, -1, barriers(c))
	}
	ks := &killingStore{Store: e.Store, e: e, at: at, after: after}
	c, err := faultComm(ctx, e, ks)
	if err != nil {
		return err
	}
	a := try(ctx, "rendezvous", e.FaultDeadline, c.Rendezvous)
	if a.err != nil {
		return fmt.Errorf("the victim's rendezvous failed before it died: %w", a.err)
	}
	return die(e) // the rendezvous made fewer calls than planned: die at its end
}

// caseKillAfterHandshake: the victim dies once every rank has announced
// its process in the handshake: at its first call of the symmetric
// memory's exchange, or of its closing round (every rank has then
// exported its buffer and mapped its peers'). Every survivor's rendezvous
// must fail because the victim's process exited, naming it (the watch of
// the peers' processes), not at its deadline for want of the victim's
// keys, and once it has closed its comm it must hold no more descriptors
// than before it made it.
func caseKillAfterHandshake(ctx context.Context, e *Env) error {
	p := e.Plan()
	closing := e.Trial%2 == 1 // odd trials: the closing round
	if e.Rank == p.Victim {
		c, err := faultComm(ctx, e, &killingStore{Store: e.Store, e: e, onKey: func(k string) bool {
			return strings.Contains(k, "symm/") && (!closing || strings.Contains(k, "/1/"))
		}})
		if err != nil {
			return err
		}
		a := try(ctx, "rendezvous", e.FaultDeadline, c.Rendezvous)
		return fmt.Errorf("the victim's rendezvous returned (%v) without reaching the symmetric exchange", a.err)
	}
	before, err := openFDs()
	if err != nil {
		return err
	}
	c, err := faultComm(ctx, e, e.Store)
	if err != nil {
		return err
	}
	a := try(ctx, "rendezvous", e.FaultDeadline, c.Rendezvous)
	took, cerr := closeTimed(c)
	a.report(e, took)
	if err := a.check(-1); err != nil {
		return err
	}
	want := fmt.Sprintf("rank %d (process ", p.Victim)
	if !errors.Is(a.err, backend.ErrPeerFailed) || !strings.Contains(a.err.Error(), want) {
		return fmt.Errorf("the rendezvous failed without saying that %s… has exited: %w", want, a.err)
	}
	after, err := openFDs()
	if err != nil {
		return err
	}
	if after > before {
		where := "first exchange"
		if closing {
			where = "closing round"
		}
		return fmt.Errorf("after the failed rendezvous (victim killed at its %s) and Close, %d descriptors are open, %d before",
			where, after, before)
	}
	return cerr
}

// setupRendezvous creates this rank's comm and rendezvouses under the
// setup deadline, for a rank whose fault comes only after the rendezvous
// (the victim of a kill or stall case); what names the rendezvous in the
// error.
func setupRendezvous(ctx context.Context, e *Env, what string) (*collective.Comm, error) {
	c, err := faultComm(ctx, e, e.Store)
	if err != nil {
		return nil, err
	}
	if a := try(ctx, "rendezvous", setupDeadline(e), c.Rendezvous); a.err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s: %w", what, a.err)
	}
	return c, nil
}

// caseKillBarrier: after a few good barriers the victim starts one more
// and dies a random few microseconds later, before or after its signals
// went out.
func caseKillBarrier(ctx context.Context, e *Env) error {
	p := e.Plan()
	good := p.Rand.IntN(3)
	delay := time.Duration(p.Rand.Int64N(int64(500 * time.Microsecond)))
	return killDuring(ctx, e, "barrier", good, delay, barriers, func(c *collective.Comm, _ int) func(context.Context) error {
		return func(ctx context.Context) error { return c.Barrier(ctx) }
	})
}

// caseKillAllReduce: after a few good all-reduces the victim starts one
// more and dies during it.
func caseKillAllReduce(ctx context.Context, e *Env) error {
	p := e.Plan()
	algo, count := faultAllReduce(p)
	good := p.Rand.IntN(3)
	delay := time.Duration(p.Rand.Int64N(int64(2 * time.Millisecond)))
	return killDuring(ctx, e, "all-reduce", good, delay,
		func(c *collective.Comm) func(int) (string, func(context.Context) error) {
			return allReduces(e, c, algo, count)
		},
		func(c *collective.Comm, seed int) func(context.Context) error {
			return func(ctx context.Context) error {
				return allReduceOnce(ctx, e, c, algo, backend.Float32, backend.Sum, count, seed, false)
			}
		})
}

// killDuring runs a kill case: every survivor makes the calls of
// survivors until one fails (survive); the victim rendezvouses, makes good
// calls of call (seeds 1 to good), starts one more and dies delay later.
// The survivors' rendezvous (their first call) has the setup deadline, as
// the victim's has: the victim dies only after its rendezvous, and under
// the fault deadline a survivor gave up on a victim slow to get there (a
// loaded machine), which then waited for the survivor instead of dying.
func killDuring(ctx context.Context, e *Env, what string, good int, delay time.Duration,
	survivors func(c *collective.Comm) func(int) (string, func(context.Context) error),
	call func(c *collective.Comm, seed int) func(context.Context) error) error {
	if e.Rank != e.Plan().Victim {
		c, err := faultComm(ctx, e, e.Store)
		if err != nil {
			return err
		}
		return surviveFrom(ctx, e, c, -1, setupDeadline(e), survivors(c))
	}
	c, err := setupRendezvous(ctx, e, "the victim's rendezvous failed before it died")
	if err != nil {
		return err
	}
	for i := range good {
		if a := try(ctx, what, setupDeadline(e), call(c, i+1)); a.err != nil {
			return fmt.Errorf("the victim's %s %d failed before it died: %w", what, i+1, a.err)
		}
	}
	go func() { _ = call(c, good+1)(ctx) }()
	time.Sleep(delay)
	return die(e)
}

// caseKillAnytime: every rank, the victim too, runs rendezvous then
// barriers and all-reduces in turn until something fails; the harness
// kills the victim at a random moment up to a second after starting the
// ranks (process start-up, store dial, rendezvous, a kernel: wherever it
// is). The victim's loop ends in the harness's SIGKILL.
func caseKillAnytime(ctx context.Context, e *Env) error {
	algo, count := faultAllReduce(e.Plan())
	c, err := faultComm(ctx, e, e.Store)
	if err != nil {
		return err
	}
	reduce := allReduces(e, c, algo, count)
	bar := barriers(c)
	return survive(ctx, e, c, -1, func(i int) (string, func(context.Context) error) {
		if i%2 == 1 {
			return reduce(i)
		}
		return bar(i)
	})
}

// doneKey is set by each surviving rank of a stall case once it is done,
// so that the stalled rank knows when it may leave.
func doneKey(rank int) string { return "faults/done/" + strconv.Itoa(rank) }

// stallUntilDone is the stalled rank: alive, never joining, until every
// other rank has finished.
func stallUntilDone(ctx context.Context, e *Env, victim int) error {
	var keys []string
	for r := range e.World {
		if r != victim {
			keys = append(keys, doneKey(r))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	if err := e.Store.Wait(wctx, keys...); err != nil {
		return fmt.Errorf("the stalled rank waited for the others to finish: %w", err)
	}
	return nil
}

// markDone tells the stalled rank that this one is finished.
func markDone(ctx context.Context, e *Env) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupDeadline(e))
	defer cancel()
	return e.Store.Set(sctx, doneKey(e.Rank), nil)
}

// caseStallRendezvous: the victim never joins the rendezvous.
func caseStallRendezvous(ctx context.Context, e *Env) error {
	p := e.Plan()
	if e.Rank == p.Victim {
		return stallUntilDone(ctx, e, p.Victim)
	}
	c, err := faultComm(ctx, e, e.Store)
	if err != nil {
		return err
	}
	err = survive(ctx, e, c, p.Victim, func(i int) (string, func(context.Context) error) {
		if i == 0 {
			return "rendezvous", c.Rendezvous
		}
		return "", nil
	})
	return errors.Join(err, markDone(ctx, e))
}

// stallAfterRendezvous runs a stall case whose victim rendezvouses, then
// never calls op while every other rank does (once).
func stallAfterRendezvous(ctx context.Context, e *Env, name string, op func(c *collective.Comm) func(context.Context) error) error {
	p := e.Plan()
	c, err := setupRendezvous(ctx, e, "rendezvous before the stall")
	if err != nil {
		return err
	}
	if e.Rank == p.Victim {
		return errors.Join(stallUntilDone(ctx, e, p.Victim), c.Close())
	}
	err = survive(ctx, e, c, p.Victim, func(i int) (string, func(context.Context) error) {
		if i == 0 {
			return name, op(c)
		}
		return "", nil
	})
	return errors.Join(err, markDone(ctx, e))
}

// caseStallBarrier: the victim never calls Barrier.
func caseStallBarrier(ctx context.Context, e *Env) error {
	return stallAfterRendezvous(ctx, e, "barrier", func(c *collective.Comm) func(context.Context) error {
		return func(ctx context.Context) error { return c.Barrier(ctx) }
	})
}

// caseStallAllReduce: the victim never calls AllReduce. The kernel's own
// deadline must end the wait, and its status word must name the victim.
func caseStallAllReduce(ctx context.Context, e *Env) error {
	algo, count := faultAllReduce(e.Plan())
	return stallAfterRendezvous(ctx, e, fmt.Sprintf("all-reduce (%v, %d floats)", algo, count),
		func(c *collective.Comm) func(context.Context) error {
			return func(ctx context.Context) error { return kernelDeadlineAllReduce(ctx, e, c, algo, count) }
		})
}

// kernelDeadlineAllReduce runs one all-reduce whose wait is bounded on the
// device: the call's context carries no deadline, so the kernel gets the
// comm's timeout (the fault deadline), and the host waits FaultGrace/2
// longer for the kernel to say why it gave up — which rank did not arrive
// — as symmetric.Memory's barrier does. (Were the host to wait with the
// kernel's own deadline, whichever gave up first would decide the error,
// and the host's says only that time ran out.)
func kernelDeadlineAllReduce(ctx context.Context, e *Env, c *collective.Comm, algo collective.Algo, count int) error {
	dev := c.Device()
	d := backend.Float32
	in, _, err := newPatterned(ctx, e, dev, d, count, 1)
	if err != nil {
		return err
	}
	defer in.close()
	s, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	w, err := c.AllReduce(context.WithoutCancel(ctx), s, in.ptr(), count, d, backend.Sum, algo)
	if err != nil {
		return err
	}
	defer w.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.FaultDeadline+FaultGrace/2)
	defer cancel()
	if err := w.Synchronize(sctx); err != nil {
		return err
	}
	got, err := in.read(ctx)
	if err != nil {
		return err
	}
	return e.checkResult(d, backend.Sum, got, count, 1)
}

// rendezvousForFault makes the rank's fault comm and rendezvouses it within
// the setup deadline; the caller closes the comm and calls cancel, which
// ends sctx.
func rendezvousForFault(ctx context.Context, e *Env) (c *collective.Comm, sctx context.Context, cancel context.CancelFunc, err error) {
	if c, err = faultComm(ctx, e, e.Store); err != nil {
		return nil, nil, nil, err
	}
	sctx, cancel = context.WithTimeout(ctx, setupDeadline(e))
	if err := c.Rendezvous(sctx); err != nil {
		cancel()
		return nil, nil, nil, errors.Join(fmt.Errorf("rendezvous: %w", err), c.Close())
	}
	return c, sctx, cancel, nil
}

// groupWork is what the group does while an outsider misbehaves:
// rendezvous, a barrier, all-reduces checked exactly, and a clean close.
func groupWork(ctx context.Context, e *Env) (err error) {
	c, sctx, cancel, err := rendezvousForFault(ctx, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer closeInto(&err, c)
	if err := c.Barrier(sctx); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	for i, algo := range []collective.Algo{collective.OneShot, collective.TwoShot} {
		if err := allReduceOnce(sctx, e, c, algo, backend.Float32, backend.Sum, 4097, i, false); err != nil {
			return fmt.Errorf("all-reduce: %w", err)
		}
	}
	return c.Barrier(sctx)
}

// caseBadStoreClient: while the group works, one rank plays an outsider on
// the group's TCP store: random bytes, a frame declaring 4 GiB, a client
// with no secret and one with a wrong secret, over and over. The server
// must hang up on each without giving away a key, and the group must not
// notice.
func caseBadStoreClient(ctx context.Context, e *Env) error {
	if e.StoreAddr == "" {
		return Skip("needs the group to meet through a TCP store")
	}
	p := e.Plan()
	if e.Rank != p.Victim {
		return groupWork(ctx, e)
	}
	token := fmt.Sprintf("faults-treasure-%d-%d", os.Getpid(), time.Now().UnixNano())
	sctx, cancel := context.WithTimeout(ctx, setupDeadline(e))
	defer cancel()
	if err := e.Store.Set(sctx, "faults/treasure", []byte(token)); err != nil {
		return err
	}
	stop := make(chan struct{})
	attacks := make(chan error, 1)
	go func() { attacks <- attackStore(ctx, e, p, token, stop) }()
	werr := groupWork(ctx, e)
	close(stop)
	aerr := <-attacks
	if werr != nil {
		return fmt.Errorf("the group was disturbed: %w", werr)
	}
	return aerr
}

// attackStore runs hostile clients against the store until stop closes,
// at least once each.
func attackStore(ctx context.Context, e *Env, p FaultPlan, token string, stop <-chan struct{}) error {
	garbage := make([]byte, 1+p.Rand.IntN(8192))
	for i := range garbage {
		garbage[i] = byte(p.Rand.IntN(256))
	}
	wrong, err := store.NewSecret()
	if err != nil {
		return err
	}
	attacks := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"random bytes", func(ctx context.Context) error { return rawAttack(ctx, e.StoreAddr, garbage, token) }},
		{"4 GiB frame", func(ctx context.Context) error {
			return rawAttack(ctx, e.StoreAddr, []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}, token)
		}},
		{"no secret", func(ctx context.Context) error { return dialAttack(ctx, e.StoreAddr, store.WithSecret(nil)) }},
		{"wrong secret", func(ctx context.Context) error {
			return dialAttack(ctx, e.StoreAddr, store.WithSecret([]byte(wrong)))
		}},
	}
	for round := 0; ; round++ {
		for _, a := range attacks {
			actx, cancel := context.WithTimeout(ctx, setupDeadline(e))
			err := a.run(actx)
			cancel()
			if err != nil {
				return fmt.Errorf("outsider on the store (%s, round %d): %w", a.name, round, err)
			}
		}
		select {
		case <-stop:
			return nil
		default:
		}
	}
}

// rawAttack writes b to a fresh store connection and reads what the
// server says until it hangs up; it must hang up, and say nothing that
// holds token.
func rawAttack(ctx context.Context, addr string, b []byte, token string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(b); err != nil {
		return nil // the server hung up first: fine
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the server kept the connection open past %v", deadline)
	}
	if bytes.Contains(got, []byte(token)) {
		return errors.New("the server sent a stored value to an unauthenticated client")
	}
	return nil
}

// dialAttack connects with opts and requires authentication to fail.
func dialAttack(ctx context.Context, addr string, opts ...store.Option) error {
	c, err := store.DialTCP(ctx, addr, opts...)
	if err == nil {
		_ = c.Close()
		return errors.New("the store let a client without the job's secret in")
	}
	if !errors.Is(err, store.ErrUnauthenticated) {
		return fmt.Errorf("want an authentication failure, got: %w", err)
	}
	return nil
}

// dropLog is a slog handler that passes on the reasons the IPC channel
// gives for dropping messages.
type dropLog struct{ reasons chan string }

func (d *dropLog) Enabled(context.Context, slog.Level) bool { return true }

func (d *dropLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "ipc: dropped message" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "reason" {
			return true
		}
		select {
		case d.reasons <- a.Value.String():
		default:
		}
		return false
	})
	return nil
}

func (d *dropLog) WithAttrs([]slog.Attr) slog.Handler { return d }
func (d *dropLog) WithGroup(string) slog.Handler      { return d }

// openFDs counts this process's open descriptors.
func openFDs() (int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	return len(entries), err
}

// caseForeignIPCSender: the group opens IPC channels; a process outside
// the group, which has learnt the channels' nonce (as if the store had
// leaked it), sends the victim a descriptor with the tag the group is
// about to use. The victim's channel must drop it, closing the descriptor
// (its descriptor count is unchanged), and the group's own exchange must
// deliver exactly the group's descriptors.
func caseForeignIPCSender(ctx context.Context, e *Env) error {
	p := e.Plan()
	target, spawner := p.Victim, (p.Victim+1)%e.World
	const tag = "faults/ipc"
	sctx, cancel := context.WithTimeout(ctx, setupDeadline(e))
	defer cancel()
	ex, err := store.NewExchange(e.Store, "faults/ipc", e.Rank, e.World)
	if err != nil {
		return err
	}
	defer ex.Close(sctx)
	nonce, err := ipc.NewNonce()
	if err != nil {
		return err
	}
	nb, err := ex.Broadcast(sctx, 0, []byte(nonce))
	if err != nil {
		return err
	}
	nonce = string(nb)
	all, err := ex.AllGather(sctx, []byte(strconv.Itoa(os.Getpid())))
	if err != nil {
		return err
	}
	pids := make([]int, e.World)
	for r, b := range all {
		if pids[r], err = strconv.Atoi(string(b)); err != nil {
			return fmt.Errorf("rank %d's pid %q: %w", r, b, err)
		}
	}
	drops := &dropLog{reasons: make(chan string, 16)}
	ch, err := ipc.Listen(nonce, ipc.WithLogger(slog.New(drops)), ipc.WithTimeout(setupDeadline(e)))
	if err != nil {
		return err
	}
	defer ch.Close()
	ch.SetPeers(pids)
	before, err := openFDs()
	if err != nil {
		return err
	}
	if err := ex.Barrier(sctx); err != nil { // every channel is receiving
		return err
	}
	if e.Rank == spawner {
		if err := runIntruder(sctx, nonce, pids[target], tag); err != nil {
			return err
		}
	}
	if err := ex.Barrier(sctx); err != nil { // the intruder has sent
		return err
	}
	if e.Rank == target {
		select {
		case reason := <-drops.reasons:
			if !strings.Contains(reason, "is not a peer") {
				return fmt.Errorf("the outsider's message was dropped, but for %q", reason)
			}
		case <-sctx.Done():
			return errors.New("the outsider's message was never dropped")
		}
		after, err := openFDs()
		if err != nil {
			return err
		}
		if after != before {
			return fmt.Errorf("%d descriptors open after the outsider's message was dropped, %d before", after, before)
		}
	}
	// Peers' descriptors would change the count: none is sent before the
	// target has counted.
	if err := ex.Barrier(sctx); err != nil {
		return err
	}
	own, err := unix.MemfdCreate("faults-ipc", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(own)
	want := fmt.Sprintf("rank %d", e.Rank)
	if _, err := unix.Pwrite(own, []byte(want), 0); err != nil {
		return err
	}
	fds, err := ch.AllGatherFD(sctx, e.Rank, pids, tag, own)
	if err != nil {
		return err
	}
	var errs []error
	for r, fd := range fds {
		if r == e.Rank {
			continue
		}
		buf := make([]byte, 64)
		n, _ := unix.Pread(fd, buf, 0)
		if got := string(buf[:n]); got != fmt.Sprintf("rank %d", r) {
			errs = append(errs, fmt.Errorf("descriptor from rank %d holds %q", r, got))
		}
		_ = unix.Close(fd)
	}
	return errors.Join(errs...)
}

// runIntruder starts the outsider (this binary in intruder mode) and waits
// for it to send its descriptor.
func runIntruder(ctx context.Context, nonce string, target int, tag string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), envChild+"=", envIntruder+"="+nonce+","+strconv.Itoa(target)+","+tag)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("outsider process: %w\n%s", err, tail(string(out), 2000))
	}
	return nil
}

// intruderMain is the outsider of caseForeignIPCSender: a process of the
// same user that is not in the group's peer set sends a descriptor to the
// target, which the kernel delivers and the target must refuse.
func intruderMain() int {
	parts := strings.SplitN(os.Getenv(envIntruder), ",", 3)
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "conformance intruder: bad %s\n", envIntruder)
		return 2
	}
	target, err := strconv.Atoi(parts[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance intruder: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := ipc.Listen(parts[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance intruder: %v\n", err)
		return 1
	}
	defer ch.Close()
	ch.SetPeers([]int{os.Getpid(), target})
	fd, err := unix.MemfdCreate("intruder", unix.MFD_CLOEXEC)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance intruder: %v\n", err)
		return 1
	}
	defer unix.Close(fd)
	_, _ = unix.Pwrite(fd, []byte("intruder"), 0)
	if err := ch.SendFD(ctx, target, parts[2], fd); err != nil {
		fmt.Fprintf(os.Stderr, "conformance intruder: %v\n", err)
		return 1
	}
	return 0
}

// caseIPCNameTaken: before the victim opens its IPC socket for the
// rendezvous of symmetric memory, another process binds that very name.
// The victim's rendezvous must fail at once with an error matching
// backend.ErrUnavailable that says the name is taken; every other rank's
// must fail within its deadline.
//
// The squatter (the rank after the victim) learns the name as an attacker
// that can read the store would: the socket nonce is in rank 0's record of
// the memory rendezvous (key "symm/<group>/0/0", JSON field "nonce"), and
// the victim's pid is public. The name must be bound before the records'
// all-gather completes (every rank opens its socket right after), so one
// rank holds back: the squatter itself, until it has squatted, or — when
// the squatter is rank 0 and must publish the record it reads — the victim,
// until told the name is taken.
func caseIPCNameTaken(ctx context.Context, e *Env) error {
	p := e.Plan()
	victim, squatter := p.Victim, (p.Victim+1)%e.World
	const group = "faults-ipc-name-taken"
	sctx, cancel := context.WithTimeout(ctx, setupDeadline(e))
	defer cancel()
	opts, err := commOptions(ctx, e, faultBuffer)
	if err != nil {
		return err
	}
	dev, err := e.Backend.Open(sctx, *opts.Device)
	if err != nil {
		return err
	}
	defer dev.Close()
	if e.Backend.Capabilities().Has(backend.CapHandleFabric) {
		if ok, err := e.Backend.FabricSupported(sctx, dev.Index()); err == nil && ok {
			return Skip("ranks share memory by fabric handle, not through the IPC channel")
		}
	}
	blk, err := symmetric.Alloc(sctx, e.Backend, dev, faultBuffer, symmetric.WithAllowOverlap(opts.AllowOverlap),
		symmetric.WithTimeout(e.FaultDeadline))
	if err != nil {
		return err
	}
	squatted := make(chan error, 1)
	var squat *ipc.Channel
	var squatMu sync.Mutex
	switch {
	case e.Rank == victim:
		if err := e.Store.Set(sctx, "faults/squat/pid", []byte(strconv.Itoa(os.Getpid()))); err != nil {
			_ = blk.Close()
			return err
		}
		if squatter == 0 {
			if err := e.Store.Wait(sctx, "faults/squat/ready"); err != nil {
				_ = blk.Close()
				return fmt.Errorf("waiting for the squatter: %w", err)
			}
		}
	case e.Rank == squatter && squatter == 0:
		go func() {
			ch, err := squatName(sctx, e, group)
			squatMu.Lock()
			squat = ch
			squatMu.Unlock()
			squatted <- err
		}()
	case e.Rank == squatter:
		ch, err := squatName(sctx, e, group)
		squat = ch
		squatted <- err
	}
	// The victim's rendezvous must fail by its error, not by a deadline: it
	// gets the setup deadline, so that a loaded machine's slow store does
	// not pass for the fault (its peers keep the fault deadline, which
	// their failure is judged by).
	deadline := e.FaultDeadline
	if e.Rank == victim {
		deadline = setupDeadline(e)
	}
	a := try(ctx, "rendezvous of symmetric memory", deadline, func(ctx context.Context) error {
		m, err := blk.Rendezvous(ctx, group, symmetric.GroupInfo{Rank: e.Rank, World: e.World, Store: e.Store})
		if err == nil {
			_ = m.Close()
		}
		return err
	})
	// The squatter holds the name until the victim has tried it: a victim
	// slow to reach its bind (a loaded machine) would otherwise find the
	// name free once the squatter's own rendezvous has timed out.
	tctx, tcancel := context.WithTimeout(ctx, setupDeadline(e))
	defer tcancel()
	var serr error
	if e.Rank == victim {
		_ = e.Store.Set(tctx, "faults/squat/tried", nil)
	}
	if e.Rank == squatter {
		serr = <-squatted
		if serr == nil {
			_ = e.Store.Wait(tctx, "faults/squat/tried")
		}
		squatMu.Lock()
		if squat != nil {
			serr = errors.Join(serr, squat.Close())
		}
		squatMu.Unlock()
	}
	a.report(e, 0)
	if e.Rank == victim {
		switch {
		case a.err == nil:
			return errors.New("the rendezvous succeeded although the victim's IPC name was taken")
		case !errors.Is(a.err, backend.ErrUnavailable) || !strings.Contains(a.err.Error(), "is taken"):
			return fmt.Errorf("the victim's rendezvous failed, but not saying that its IPC name is taken: %w", a.err)
		}
		return nil
	}
	if a.err != nil {
		if err := a.check(-1); err != nil {
			return errors.Join(err, serr)
		}
	}
	return serr
}

// squatName binds the victim's IPC socket name of the group's rendezvous
// and tells the victim to go on.
func squatName(ctx context.Context, e *Env, group string) (*ipc.Channel, error) {
	pidText, err := e.Store.Get(ctx, "faults/squat/pid")
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(string(pidText))
	if err != nil {
		return nil, err
	}
	record, err := e.Store.Get(ctx, "symm/"+group+"/0/0")
	if err != nil {
		return nil, fmt.Errorf("reading rank 0's rendezvous record: %w", err)
	}
	var info struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal(record, &info); err != nil || info.Nonce == "" {
		return nil, fmt.Errorf("rank 0's rendezvous record %q holds no nonce: %v", record, err)
	}
	ch, err := ipc.Listen(info.Nonce, ipc.WithPID(pid))
	if err != nil {
		return nil, fmt.Errorf("binding the victim's IPC name: %w", err)
	}
	if err := e.Store.Set(ctx, "faults/squat/ready", nil); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return ch, nil
}

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
	seeded := func(seed int) moverCall { m := m; m.seed = seed; return m }
	return killDuring(ctx, e, m.op.String(), good, delay,
		func(c *collective.Comm) func(int) (string, func(context.Context) error) {
			return func(i int) (string, func(context.Context) error) {
				if i == 0 {
					return "rendezvous", c.Rendezvous
				}
				return fmt.Sprintf("call %d: %v", i, m), func(ctx context.Context) error { return moverOnce(ctx, e, c, seeded(i)) }
			}
		},
		func(c *collective.Comm, seed int) func(context.Context) error {
			return func(ctx context.Context) error { return moverOnce(ctx, e, c, seeded(seed)) }
		})
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
	switch p.Rand.IntN(5) {
	case 0:
		for other.op == agreed.op {
			other = faultMover(p, e.World)
		}
	case 4:
		other.algo = collective.Pipeline // the same call on another path
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
	// the case's whole remaining time (40 s on 4×H100, 2026-11-26,
	// docs/results/2026-11-26-h100x4-c/run2).
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

// abortCallCount is the all-reduce of caseAbortDuringCall: small, since
// the case is about the wait, not the data.
const abortCallCount = 4099

// caseAbortDuringCall: every rank but the last launches an all-reduce
// whose kernel waits for the last with the comm's whole timeout ahead,
// then aborts the comm while that kernel waits (as PyTorch's watchdog
// calls ncclCommAbort under a hung call). The last rank makes the same
// call into a stream capture that it never replays: it takes part in the
// launch (ranks that share a device meet there) but its kernel never
// runs. Abort must stop the waiting kernel rather than wait out its
// deadline: it returns, and so does the kernel, within a quarter of the
// case's timeout, well before the kernel's own deadline; the device is
// still usable after it (a kernel that outlived the memory it reads would
// have faulted), and nothing outside the caller's buffer was written.
func caseAbortDuringCall(ctx context.Context, e *Env) (err error) {
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
	in, _, err := newPatterned(ctx, e, dev, backend.Float32, abortCallCount, 1)
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
	w, err := c.AllReduce(context.WithoutCancel(ctx), s, in.ptr(), abortCallCount, backend.Float32, backend.Sum, collective.OneShot)
	if err != nil {
		return errors.Join(fmt.Errorf("all-reduce: %w", err), c.Close())
	}
	defer w.Close()
	time.Sleep(100 * time.Millisecond) // the kernel is waiting for the victim by now
	bound := e.Timeout / 4
	start := time.Now()
	err = c.Abort()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("aborting the comm during a call: %w", err)
	}
	if took > bound {
		return fmt.Errorf("aborting the comm during a call took %v: it waited for the kernel's deadline (%v) instead of ending it", took, e.Timeout)
	}
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := s.Synchronize(sctx); err != nil {
		return fmt.Errorf("the call's stream after the comm was aborted (the abort took %v): %w", took, err)
	}
	// The device still works, and the call wrote only its own buffer.
	if _, err := in.read(ctx); err != nil {
		return fmt.Errorf("reading the call's buffer after the comm was aborted: %w", err)
	}
	return in.checkCanaries(ctx)
}

// neverRun makes caseAbortDuringCall's all-reduce into a capture of s and
// drops the graph unlaunched.
func neverRun(ctx context.Context, c *collective.Comm, s backend.Stream, buf backend.DevicePtr) error {
	if err := s.BeginCapture(); err != nil {
		return err
	}
	w, err := c.AllReduce(context.WithoutCancel(ctx), s, buf, abortCallCount, backend.Float32, backend.Sum, collective.OneShot)
	if err == nil {
		err = w.Close()
	}
	g, cerr := s.EndCapture()
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	return errors.Join(err, g.Close())
}
