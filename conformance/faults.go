package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/symmetric/store"
)

// Bounds every fault case is held to.
const (
	// DefaultFaultDeadline is Config.FaultDeadline's default.
	DefaultFaultDeadline = 2 * time.Second
	// FaultGrace is how long past its deadline a surviving rank's
	// operation may take to return its error.
	FaultGrace = 2 * time.Second
	// FaultCloseLimit bounds a surviving rank's Close after the fault.
	FaultCloseLimit = 5 * time.Second
)

// Environment of fault trials' children (see also harness.go).
const (
	envTrial         = "INTRANODE_CONFORMANCE_TRIAL"
	envFaultDeadline = "INTRANODE_CONFORMANCE_FAULT_DEADLINE"
	envStartSkew     = "INTRANODE_CONFORMANCE_START_SKEW"
	// envIntruder makes MaybeChild run intruderMain instead of a rank;
	// its value is "nonce,target pid,tag".
	envIntruder = "INTRANODE_CONFORMANCE_INTRUDER"
)

// reportMarker starts the line on which a child rank prints a FaultReport.
const reportMarker = "INTRANODE-CONFORMANCE-FAULT-REPORT:"

// Role is what a fault case does to its victim rank, and so what the
// harness expects of every rank.
type Role int

// Roles.
const (
	// VictimNone: nothing is done to the group (a hostile outsider acts
	// instead); every rank must succeed.
	VictimNone Role = iota
	// VictimDies: the victim is killed with SIGKILL (by itself at a chosen
	// point, or by the harness); its process must end by that signal, and
	// every other rank must report an error within the deadline plus
	// FaultGrace and Close within FaultCloseLimit.
	VictimDies
	// VictimStalls: the victim stays alive but does not join the
	// operation; every other rank must report an error within the
	// deadline plus FaultGrace (the case checks that it names the victim).
	VictimStalls
	// VictimFails: the victim's own setup fails (its IPC name is taken,
	// say); every rank, the victim included, must report an error within
	// the deadline plus FaultGrace.
	VictimFails
)

// Fault describes a fault case.
type Fault struct {
	// Summary names the fault in the trial count line, e.g. "killed rank
	// during barrier".
	Summary string
	// Role is what happens to the victim.
	Role Role
	// Processes: the case needs every rank in a process of its own (a
	// rank is killed, or spawns an outsider); Goroutines mode skips it.
	Processes bool
	// ParentKill: the harness SIGKILLs the victim FaultPlan.KillAfter after
	// starting the ranks, wherever it has got to.
	ParentKill bool
	// Expect, if set, says what a passed trial showed, in the trial count
	// line, instead of the role's wording.
	Expect string
}

// FaultReport is what a rank of a fault case says about the operation in
// which it met the fault. Err is empty when no operation failed.
type FaultReport struct {
	Rank     int           `json:"rank"`
	Op       string        `json:"op"`
	Err      string        `json:"err"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Deadline time.Duration `json:"deadline_ns"`
	Close    time.Duration `json:"close_ns"`
}

// ReportFault sends the harness the outcome of the operation in which this
// rank met the fault (Err empty if none did, which fails the trial). Rank
// is filled in. A rank of a fault case whose role calls for it reports
// exactly once.
func (e *Env) ReportFault(r FaultReport) {
	r.Rank = e.Rank
	if e.report != nil {
		e.report(r)
	}
}

// FaultPlan is a fault case's choices for one trial: the same on every rank
// and in the harness, since all derive them from the case, world and trial.
type FaultPlan struct {
	// Victim is the rank the fault strikes.
	Victim int
	// KillAfter is when the harness kills the victim of a ParentKill case,
	// counted from the start of the ranks.
	KillAfter time.Duration
	// Rand gives a case further choices; every rank must draw the same
	// ones in the same order.
	Rand *rand.Rand
}

// planFor derives a trial's plan.
func planFor(name string, world, trial int) FaultPlan {
	h := fnv.New64a()
	h.Write([]byte(name))
	seed := h.Sum64()
	rng := rand.New(rand.NewPCG(seed, uint64(world)<<32|uint64(trial)))
	p := FaultPlan{Victim: rng.IntN(world)}
	p.KillAfter = time.Duration(rng.Int64N(int64(time.Second)))
	p.Rand = rng
	return p
}

// Plan is this trial's FaultPlan.
func (e *Env) Plan() FaultPlan { return planFor(e.name, e.World, e.Trial) }

// childFaultEnv completes a child rank's Env from its environment.
func childFaultEnv(e *Env, name string) {
	e.name = name
	e.Processes = true
	e.StoreAddr = os.Getenv(envStore)
	e.Trial, _ = strconv.Atoi(os.Getenv(envTrial))
	e.FaultDeadline = DefaultFaultDeadline
	if d, err := time.ParseDuration(os.Getenv(envFaultDeadline)); err == nil && d > 0 {
		e.FaultDeadline = d
	}
	if d, err := time.ParseDuration(os.Getenv(envStartSkew)); err == nil && d > 0 {
		e.StartSkew = d
	}
	e.report = func(r FaultReport) {
		b, _ := json.Marshal(r)
		fmt.Fprintln(os.Stderr, reportMarker, string(b))
	}
}

// rankOutcome is how one rank of a trial ended.
type rankOutcome struct {
	err     error // what the rank returned, or how its process failed
	killed  bool  // its process ended by SIGKILL
	hung    bool  // the harness had to kill it
	skip    *skipError
	reports []FaultReport
}

// trialTimeout bounds a whole trial: generous next to the few operations
// a fault case runs, short enough that a hang is found quickly.
func trialTimeout(cfg Config) time.Duration {
	return min(cfg.Timeout, 8*cfg.FaultDeadline+15*time.Second)
}

// runFaultCase runs every trial of a fault case at one world size.
func runFaultCase(ctx context.Context, cfg Config, b backend.Backend, c Case, world int) Result {
	res := Result{Case: c.Name, World: world, Mode: cfg.Mode}
	reason := skipReason(ctx, cfg, b, c, world)
	if reason == "" && c.Fault.Processes && cfg.Mode != Processes {
		reason = "a rank must be a process of its own here; run in processes mode"
	}
	if reason != "" {
		res.Status, res.Reason = Skipped, reason
		return res
	}
	start := time.Now()
	verdicts := make([]*verdict, cfg.Trials)
	trials := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.FaultParallel, cfg.Trials) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for trial := range trials {
				plan := planFor(c.Name, world, trial)
				var outs []rankOutcome
				if cfg.Mode == Processes {
					outs = runTrialProcesses(ctx, cfg, c, world, trial, plan)
				} else {
					outs = runTrialGoroutines(ctx, cfg, b, c, world, trial)
				}
				if ctx.Err() != nil {
					return // interrupted: the trial says nothing
				}
				v := judgeTrial(c.Fault, plan.Victim, outs)
				verdicts[trial] = &v
				cfg.Logger.Debug("conformance: fault trial", "case", c.Name, "world", world, "trial", trial,
					"victim", plan.Victim, "passed", v.fail == "" && v.skip == "")
			}
		}()
	}
feed:
	for trial := range cfg.Trials {
		select {
		case trials <- trial:
		case <-ctx.Done():
			break feed
		}
	}
	close(trials)
	wg.Wait()
	var failures []string
	for trial, v := range verdicts {
		switch {
		case v == nil:
			failures = append(failures, fmt.Sprintf("trial %d: not run: %v", trial, context.Cause(ctx)))
			continue
		case v.skip != "":
			res.Status, res.Reason, res.Trials = Skipped, v.skip, 0
			res.Duration = time.Since(start)
			return res
		}
		res.Trials++
		if v.fail != "" {
			failures = append(failures, fmt.Sprintf("trial %d (victim rank %d): %s",
				trial, planFor(c.Name, world, trial).Victim, v.fail))
			continue
		}
		res.TrialsPassed++
		res.SlowestError = max(res.SlowestError, v.slowest)
		res.SlowestClose = max(res.SlowestClose, v.slowestClose)
	}
	res.Duration = time.Since(start)
	res.Summary = faultSummary(c.Fault, res)
	res.Status = Pass
	if len(failures) > 0 {
		res.Status = Fail
		const shown = 5
		if len(failures) > shown {
			failures = append(failures[:shown], fmt.Sprintf("… and %d more failed trials", len(failures)-shown))
		}
		res.Reason = strings.Join(failures, "\n")
	}
	return res
}

// faultSummary is the trial count line, e.g. "killed rank during barrier:
// 100/100 trials ended in an error on every survivor within deadline+2s".
func faultSummary(f *Fault, r Result) string {
	var what string
	switch f.Role {
	case VictimDies:
		what = "ended in an error on every survivor within deadline+" + FaultGrace.String()
	case VictimStalls:
		what = "ended in an error naming the stalled rank on every other rank within deadline+" + FaultGrace.String()
	case VictimFails:
		what = "ended in a clear error on the victim and an error on every rank within deadline+" + FaultGrace.String()
	default:
		what = "left the group undisturbed"
	}
	if f.Expect != "" {
		what = f.Expect
	}
	s := fmt.Sprintf("%s: %d/%d trials %s", f.Summary, r.TrialsPassed, r.Trials, what)
	if f.Role != VictimNone && r.TrialsPassed > 0 {
		s += fmt.Sprintf(" (slowest error %v, slowest Close %v)", r.SlowestError.Round(time.Millisecond),
			r.SlowestClose.Round(time.Millisecond))
	}
	return s
}

// verdict is the judgement of one trial.
type verdict struct {
	skip, fail   string
	slowest      time.Duration // the slowest reported failing operation
	slowestClose time.Duration
}

// judgeTrial checks every rank's outcome against the fault's role.
func judgeTrial(f *Fault, victim int, outs []rankOutcome) verdict {
	var v verdict
	var problems []string
	skips := 0
	for r, o := range outs {
		if o.skip != nil {
			skips++
			v.skip = o.skip.reason
			continue
		}
		isVictim := r == victim && f.Role != VictimNone
		if o.hung {
			problems = append(problems, fmt.Sprintf("rank %d hung and was killed by the harness: %v", r, o.err))
			continue
		}
		if isVictim && f.Role == VictimDies {
			if !o.killed {
				problems = append(problems, fmt.Sprintf("rank %d was to be killed but ended otherwise: %v", r, o.err))
			}
			continue
		}
		if o.killed {
			problems = append(problems, fmt.Sprintf("rank %d was killed, but it was not the victim", r))
			continue
		}
		if o.err != nil {
			problems = append(problems, fmt.Sprintf("rank %d: %v", r, o.err))
			continue
		}
		if f.Role == VictimNone || (isVictim && f.Role == VictimStalls) {
			continue
		}
		if len(o.reports) != 1 {
			problems = append(problems, fmt.Sprintf("rank %d made %d fault reports, want 1", r, len(o.reports)))
			continue
		}
		rep := o.reports[0]
		switch {
		case rep.Err == "":
			problems = append(problems, fmt.Sprintf("rank %d: %s succeeded despite the fault", r, rep.Op))
		case rep.Elapsed > rep.Deadline+FaultGrace:
			problems = append(problems, fmt.Sprintf("rank %d: %s took %v to fail, more than its deadline %v + %v: %s",
				r, rep.Op, rep.Elapsed, rep.Deadline, FaultGrace, rep.Err))
		case rep.Close > FaultCloseLimit:
			problems = append(problems, fmt.Sprintf("rank %d: Close took %v after the fault (limit %v)", r, rep.Close, FaultCloseLimit))
		default:
			v.slowest = max(v.slowest, rep.Elapsed)
			v.slowestClose = max(v.slowestClose, rep.Close)
		}
	}
	if skips == len(outs) {
		return verdict{skip: v.skip}
	}
	if skips > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d ranks skipped (%s): ranks disagree", skips, len(outs), v.skip))
	}
	v.skip = ""
	v.fail = strings.Join(problems, "; ")
	return v
}

// runFaultRank runs one rank of a case. The ranks of a fault trial first
// meet at a start barrier (startBarrier); with Config.StartSkew the
// victim reaches it that long after the others, as a rank process slow to
// start would.
func runFaultRank(ctx context.Context, c Case, e *Env) error {
	if c.Fault == nil {
		return c.Run(ctx, e)
	}
	if e.StartSkew > 0 && e.Rank == e.Plan().Victim {
		t := time.NewTimer(e.StartSkew)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if !c.Fault.ParentKill {
		if err := startBarrier(ctx, e); err != nil {
			return err
		}
	}
	return c.Run(ctx, e)
}

// startBarrier waits, under the setup deadline, until every rank of the
// trial has started: a rank process slow to start (a loaded machine, a
// launcher that starts the ranks one by one) is then no part of what a
// fault case times. (Without it a survivor could give up on a rendezvous
// under the fault deadline before a late victim arrived; the victim,
// arriving, then waited for the survivor and never reached its planned
// death.) Cases whose victim the harness kills at a planned time from the
// ranks' start (Fault.ParentKill) skip it: their victim may die before
// reaching it.
func startBarrier(ctx context.Context, e *Env) error {
	ex, err := store.NewExchange(e.Store, "faults/started", e.Rank, e.World, store.WithTimeout(setupDeadline(e)))
	if err != nil {
		return err
	}
	if err := errors.Join(ex.Barrier(ctx), ex.Close(ctx)); err != nil {
		return fmt.Errorf("conformance: rank %d: waiting for the trial's ranks to start: %w", e.Rank, err)
	}
	return nil
}

// runTrialGoroutines runs one trial with the ranks as goroutines.
func runTrialGoroutines(ctx context.Context, cfg Config, b backend.Backend, c Case, world, trial int) []rankOutcome {
	outs := make([]rankOutcome, world)
	timeout := trialTimeout(cfg)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	errs := runGoroutines(ctx, b, cfg, world, func(e *Env) {
		e.Timeout, e.Trial, e.FaultDeadline, e.StartSkew, e.name = timeout, trial, cfg.FaultDeadline, cfg.StartSkew, c.Name
		e.report = func(rep FaultReport) {
			mu.Lock()
			defer mu.Unlock()
			outs[e.Rank].reports = append(outs[e.Rank].reports, rep)
		}
	}, func(ctx context.Context, e *Env) error { return runFaultRank(ctx, c, e) })
	for r, err := range errs {
		var sk skipError
		if errors.As(err, &sk) {
			outs[r].skip = &sk
			continue
		}
		outs[r].err = err
	}
	if ctx.Err() != nil {
		for r := range outs {
			if outs[r].err != nil {
				outs[r].hung = true
			}
		}
	}
	return outs
}

// runTrialProcesses runs one trial with every rank a child process meeting
// through a TCP store secured with a fresh secret (or Config.StoreURL); for
// a ParentKill fault it SIGKILLs the victim at the planned time.
func runTrialProcesses(ctx context.Context, cfg Config, c Case, world, trial int, plan FaultPlan) []rankOutcome {
	outs := make([]rankOutcome, world)
	failAll := func(err error) []rankOutcome {
		for r := range outs {
			outs[r].err = err
		}
		return outs
	}
	timeout := trialTimeout(cfg)
	g, err := startRanks(ctx, cfg, world, true, timeout, func(r int) []string {
		return append(rankEnv(cfg, world, r, c.Name, timeout), envTrial+"="+strconv.Itoa(trial),
			envFaultDeadline+"="+cfg.FaultDeadline.String(), envStartSkew+"="+cfg.StartSkew.String())
	})
	if err != nil {
		return failAll(err)
	}
	if c.Fault.ParentKill {
		t := time.AfterFunc(plan.KillAfter, func() { _ = g.Signal(plan.Victim, syscall.SIGKILL) })
		defer t.Stop()
	}
	for _, x := range g.Wait() {
		outs[x.Rank] = processOutcome(x)
	}
	return outs
}

// processOutcome reads how a child rank ended from its exit status and
// output.
func processOutcome(x launch.Result) rankOutcome {
	var o rankOutcome
	text := x.Output
	for _, line := range strings.Split(text, "\n") {
		_, js, ok := strings.Cut(line, reportMarker)
		if !ok {
			continue
		}
		var rep FaultReport
		if jerr := json.Unmarshal([]byte(strings.TrimSpace(js)), &rep); jerr == nil {
			o.reports = append(o.reports, rep)
		}
	}
	if _, reason, ok := strings.Cut(text, skipMarker); ok {
		o.skip = &skipError{strings.TrimSpace(firstLine(reason))}
		return o
	}
	o.killed, o.hung = x.Killed, x.TimedOut
	if x.Err != nil {
		var detail string
		if x.TimedOut {
			// The end of a hung rank's goroutine dump is the runtime's
			// own goroutines: say first where this module's code waited.
			detail = launch.HungStacks(text) + "\n" + tail(strings.TrimSpace(text), 1000)
		} else {
			detail = tail(strings.TrimSpace(text), 4000)
		}
		o.err = fmt.Errorf("rank %d process: %w\n%s", x.Rank, x.Err, detail)
	}
	return o
}

// die ends this rank's process with SIGKILL, as a crash or the OOM killer
// would: no deferred call runs, nothing is closed.
func die(e *Env) error {
	if !e.Processes {
		return errors.New("conformance: a rank may kill itself only when it is a process of its own")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("conformance: rank %d could not kill itself: %w", e.Rank, err)
	}
	// The signal cannot be caught; wait for it to land.
	time.Sleep(time.Minute)
	return errors.New("conformance: survived SIGKILL")
}
