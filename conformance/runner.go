package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intranode/intranode/backend"
)

// Case is one conformance check, run on every rank of a group.
type Case struct {
	// Name is unique, slash-separated by group ("allreduce/oneshot/bf16").
	Name string
	// Single cases run once with one rank (World 1) whatever the worlds.
	Single bool
	// Needs lists capabilities the backend must declare; otherwise the
	// case is skipped with the missing ones named.
	Needs backend.Capability
	// MinWorld skips worlds smaller than this.
	MinWorld int
	// Hosts marks a case across simulated hosts: it runs only when
	// Config.Hosts splits the world into hosts of 2 or more ranks.
	Hosts bool
	// Run is executed by every rank; returning Skip(...) on every rank
	// skips the case.
	Run func(ctx context.Context, e *Env) error
	// Fault, if set, makes this a fault case: it runs only when
	// Config.Faults is set, Config.Trials times, and each trial is judged
	// by what its ranks report (see Fault).
	Fault *Fault
}

// Status of a case run.
type Status string

// Statuses.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Skipped Status = "skip"
)

// Result is the outcome of one case at one world size.
type Result struct {
	Case     string        `json:"case"`
	World    int           `json:"world"`
	Mode     Mode          `json:"mode"`
	Status   Status        `json:"status"`
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Fault cases only: how many trials ran and met the case's
	// expectation, the one-line Summary of that, and the slowest
	// surviving rank's failing operation and Close over all trials.
	Trials       int           `json:"trials,omitempty"`
	TrialsPassed int           `json:"trials_passed,omitempty"`
	Summary      string        `json:"summary,omitempty"`
	SlowestError time.Duration `json:"slowest_error_ns,omitempty"`
	SlowestClose time.Duration `json:"slowest_close_ns,omitempty"`
}

// The case registry: filled from init functions of this package, read by
// the runner and by child processes looking a case up by name.
var (
	casesMu sync.RWMutex
	cases   []Case
)

func register(cs ...Case) {
	casesMu.Lock()
	defer casesMu.Unlock()
	cases = append(cases, cs...)
}

// Cases lists every registered case in registration order.
func Cases() []Case {
	casesMu.RLock()
	defer casesMu.RUnlock()
	return append([]Case(nil), cases...)
}

func caseByName(name string) (Case, bool) {
	for _, c := range Cases() {
		if c.Name == name {
			return c, true
		}
	}
	return Case{}, false
}

// Run executes every selected case at every world size and returns the
// results; report, if non-nil, is called as each result is known. The
// error is for failures of the harness itself (no backend), not of cases.
func Run(ctx context.Context, cfg Config, report func(Result)) ([]Result, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	b, err := openBackend(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := b.Probe(ctx); err != nil {
		return nil, fmt.Errorf("conformance: backend %s: %w", b.Name(), err)
	}
	var results []Result
	eachRun(cfg, func(c Case, w int) {
		r := runAny(ctx, cfg, b, c, w)
		results = append(results, r)
		if report != nil {
			report(r)
		}
	})
	return results, nil
}

// eachRun calls f for every case cfg selects at every world it runs at:
// cfg.Worlds, or world 1 alone for a single-rank case.
func eachRun(cfg Config, f func(c Case, world int)) {
	for _, c := range Cases() {
		if !selected(cfg, c) {
			continue
		}
		worlds := cfg.Worlds
		if c.Single {
			worlds = []int{1}
		}
		for _, w := range worlds {
			f(c, w)
		}
	}
}

func openBackend(ctx context.Context, cfg Config) (backend.Backend, error) {
	if cfg.Open != nil {
		return cfg.Open(ctx)
	}
	return backend.Open(ctx, cfg.Backend)
}

// selected reports whether cfg runs c: fault cases only with cfg.Faults.
func selected(cfg Config, c Case) bool {
	if c.Fault != nil && !cfg.Faults {
		return false
	}
	return cfg.Filter == nil || cfg.Filter(c.Name)
}

// runAny runs c at world, as a fault case when it is one.
func runAny(ctx context.Context, cfg Config, b backend.Backend, c Case, world int) Result {
	if c.Fault != nil {
		return runFaultCase(ctx, cfg, b, c, world)
	}
	return runCase(ctx, cfg, b, c, world)
}

// skipReason says why c cannot run at world on b, or "" when it can.
func skipReason(ctx context.Context, cfg Config, b backend.Backend, c Case, world int) string {
	if missing := c.Needs &^ b.Capabilities(); missing != 0 {
		return fmt.Sprintf("backend %s lacks capability %s", b.Name(), capNames(missing))
	}
	if world < c.MinWorld {
		return fmt.Sprintf("needs world >= %d", c.MinWorld)
	}
	if c.Hosts && (cfg.Hosts < 2 || world%cfg.Hosts != 0) {
		return fmt.Sprintf("runs across simulated hosts only: --hosts H with world a multiple of H (hosts %d, world %d)", cfg.Hosts, world)
	}
	if n, err := b.DeviceCount(ctx); err == nil && world > n && !cfg.ShareDevice && !b.Capabilities().Has(backend.CapOverlapDevices) {
		return fmt.Sprintf("world %d needs %d devices, backend %s has %d", world, world, b.Name(), n)
	}
	return ""
}

func runCase(ctx context.Context, cfg Config, b backend.Backend, c Case, world int) Result {
	res := Result{Case: c.Name, World: world, Mode: cfg.Mode}
	if reason := skipReason(ctx, cfg, b, c, world); reason != "" {
		res.Status, res.Reason = Skipped, reason
		return res
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var errs []error
	mode := cfg.Mode
	if c.Single {
		mode = Goroutines // one rank needs no second process
	}
	if mode == Processes {
		errs = runProcesses(cctx, cfg, world, c.Name)
	} else {
		errs = runGoroutines(cctx, b, cfg, world, nil, c.Run)
	}
	res.Duration = time.Since(start)
	res.Status, res.Reason = summarize(errs)
	return res
}

func summarize(errs []error) (Status, string) {
	var fails []string
	skips := 0
	reason := ""
	for r, err := range errs {
		var sk skipError
		switch {
		case err == nil:
		case errors.As(err, &sk):
			skips++
			reason = sk.reason
		default:
			fails = append(fails, fmt.Sprintf("rank %d: %v", r, err))
		}
	}
	switch {
	case len(fails) > 0:
		return Fail, strings.Join(fails, "\n")
	case skips == len(errs):
		return Skipped, reason
	case skips > 0:
		return Fail, fmt.Sprintf("%d of %d ranks skipped (%s): ranks disagree", skips, len(errs), reason)
	}
	return Pass, ""
}

func capNames(c backend.Capability) string {
	names := []struct {
		c backend.Capability
		n string
	}{{backend.CapMultiProcess, "multi-process"}, {backend.CapHandleFD, "fd-handles"}, {backend.CapHandleFabric, "fabric-handles"},
		{backend.CapGraphs, "graphs"}, {backend.CapHostMapped, "host-mapped"}, {backend.CapTiming, "timing"},
		{backend.CapOverlapDevices, "overlap-devices"}}
	var out []string
	for _, n := range names {
		if c.Has(n.c) {
			out = append(out, n.n)
		}
	}
	return strings.Join(out, ",")
}

// RunTests runs the suite as subtests of t, one per case and world
// ("allreduce/oneshot/bf16/world2"). Skipped cases call t.Skip with the
// reason. In Processes mode the test binary's TestMain must call
// MaybeChild, and cfg.ChildArgs should select the calling test.
func RunTests(t *testing.T, cfg Config) {
	t.Helper()
	cfg.defaults()
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	b, err := openBackend(context.Background(), cfg)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	defer b.Close()
	if err := b.Probe(context.Background()); err != nil {
		t.Skipf("conformance: backend %s unavailable: %v", b.Name(), err)
	}
	eachRun(cfg, func(c Case, w int) {
		t.Run(fmt.Sprintf("%s/world%d", c.Name, w), func(t *testing.T) {
			r := runAny(context.Background(), cfg, b, c, w)
			if r.Summary != "" {
				t.Log(r.Summary)
			}
			switch r.Status {
			case Skipped:
				t.Skip(r.Reason)
			case Fail:
				t.Fatal(r.Reason)
			}
		})
	})
}
