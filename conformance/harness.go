package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/symmetric/store"
)

// Mode says how the ranks of a case run.
type Mode string

// Modes.
const (
	// Goroutines runs every rank in this process, sharing one backend.
	Goroutines Mode = "goroutines"
	// Processes runs every rank as a child process (the running binary
	// re-executed), meeting through a TCP store served by the parent, or
	// through the store Config.StoreURL names.
	Processes Mode = "processes"
)

// Environment variables a child rank reads. They are set by the parent and
// are not meant for users.
const (
	envChild   = "INTRANODE_CONFORMANCE_CHILD" // case name
	envWorld   = "INTRANODE_CONFORMANCE_WORLD"
	envStore   = "INTRANODE_CONFORMANCE_STORE" // address of the parent's TCP store
	envBackend = "INTRANODE_CONFORMANCE_BACKEND"
	envTimeout = "INTRANODE_CONFORMANCE_TIMEOUT"
	envQuick   = "INTRANODE_CONFORMANCE_QUICK"
	envHosts   = "INTRANODE_CONFORMANCE_HOSTS"
	// Config.StoreURL, and the case's prefix in that store, when the
	// children open it themselves instead of dialling envStore.
	envStoreURL    = "INTRANODE_CONFORMANCE_STORE_URL"
	envStorePrefix = "INTRANODE_CONFORMANCE_STORE_PREFIX"
)

// Config describes what to run and how.
type Config struct {
	// Backend is the registry name children open; in Goroutines mode it is
	// opened once unless Open is set.
	Backend string
	// Open, if set, provides the backend in Goroutines mode (tests of a
	// backend under construction pass their own).
	Open func(ctx context.Context) (backend.Backend, error)
	// Mode is Goroutines or Processes.
	Mode Mode
	// Worlds are the group sizes to run multi-rank cases with.
	Worlds []int
	// Timeout bounds each case (every rank's waits derive from it).
	Timeout time.Duration
	// Quick trims the size sweeps (CI under the race detector).
	Quick bool
	// Hosts splits each world into this many simulated hosts for the
	// hosts/ cases (collective.HostGroups); below 2 they skip.
	Hosts int
	// ShareDevice puts every rank on device 0 (collective.Options
	// AllowOverlap): a correctness run of many ranks on one GPU, never a
	// performance figure. Ranks must be goroutines (one process, one
	// context on the device).
	ShareDevice bool
	// ChildArgs are the arguments a child process is started with: for a
	// test binary, the -test.run pattern that reaches MaybeChild; for the
	// CLI, its hidden rank command. Processes mode needs them.
	ChildArgs []string
	// Filter, if set, selects cases by name.
	Filter func(name string) bool
	// NewStores, if set, gives each case's ranks their stores in
	// Goroutines mode instead of one fresh in-process store: stores[r] is
	// rank r's (ranks may share one), fresh and empty for every call (a
	// new etcd prefix, say); release closes them once the case ends.
	NewStores func(ctx context.Context, world int) (stores []store.Store, release func(), err error)
	// StoreURL, if set, names the store the ranks meet through, in both
	// modes, instead of one the harness provides (store.Open: file:///DIR,
	// tcp://HOST:PORT, etcd://HOST:PORT/PREFIX, and mem://NAME in
	// Goroutines mode): every rank opens it itself — a child process from
	// the environment the harness gives it, a goroutine through NewStores'
	// mechanism — so that each has its own connection (and, with etcd,
	// its own lease), as the ranks of a multi-host job do. Each case, and
	// each trial of a fault case, runs under a fresh prefix of the store
	// (store.OpenPrefixed), so it never reads another's keys. The program
	// that runs the suite, and in Processes mode its children, must link
	// the URL's scheme (import symmetric/store/etcdstore for etcd://).
	// Fault cases that attack the harness's own TCP store skip. It
	// excludes NewStores.
	StoreURL string
	// Logger receives progress at debug level.
	Logger *slog.Logger
	// Faults adds the "faults" group (cases with a Fault: ranks killed or
	// stalled at each phase, hostile store clients and IPC senders). It is
	// off by default; Filter still applies.
	Faults bool
	// Trials is how many times each fault case runs (default 1); ordinary
	// cases run once whatever it says.
	Trials int
	// FaultDeadline bounds each operation of a fault case (default 2s):
	// survivors must fail within it plus FaultGrace.
	FaultDeadline time.Duration
	// FaultParallel is how many trials of a fault case run at once
	// (default 1). Trials are independent — each has its own store and
	// ranks — so running several only adds load, which the deadlines must
	// withstand anyway.
	FaultParallel int
	// StartSkew makes the victim of every fault trial start this long
	// after the other ranks, as a rank process slow to start would (a
	// loaded machine, a cold page cache, a launcher that starts the ranks
	// one by one). The ranks of a fault trial meet at a start barrier,
	// under a deadline long enough for that, before a case's timed part,
	// so a late rank is not taken for the fault. 0: no delay.
	StartSkew time.Duration

	// pool keeps the host buffers of the checked calls of a run's ranks
	// in this process, from case to case (see hostPool).
	pool *hostPool
}

func (c *Config) defaults() {
	if c.pool == nil {
		c.pool = &hostPool{}
	}
	if c.Mode == "" {
		c.Mode = Goroutines
	}
	if len(c.Worlds) == 0 {
		c.Worlds = []int{2}
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Backend == "" {
		c.Backend = "auto"
	}
	if c.Trials < 1 {
		c.Trials = 1
	}
	if c.FaultDeadline <= 0 {
		c.FaultDeadline = DefaultFaultDeadline
	}
	if c.FaultParallel < 1 {
		c.FaultParallel = 1
	}
}

// Env is what a case sees on one rank.
type Env struct {
	Rank    int
	World   int
	Store   store.Store
	Backend backend.Backend
	// Timeout is the case's bound; cases give their waits less so that
	// a failure is reported rather than the case killed.
	Timeout time.Duration
	// Quick trims size sweeps.
	Quick bool
	// Hosts is Config.Hosts.
	Hosts int
	// StoreAddr is the address of the TCP store the harness serves for
	// the ranks in Processes mode; empty in Goroutines mode and when the
	// ranks open Config.StoreURL.
	StoreAddr string
	// Processes is set when every rank is a process of its own.
	Processes bool
	// Trial numbers the runs of a fault case (from 0). Fault cases derive
	// their random choices from it (FaultPlan), so that every rank and the
	// harness make the same ones.
	Trial int
	// FaultDeadline bounds each operation of a fault case.
	FaultDeadline time.Duration
	// StartSkew is Config.StartSkew: the victim of a fault trial waits
	// this long before the trial's start barrier.
	StartSkew time.Duration
	// ShareDevice puts every rank on device 0 (Config.ShareDevice).
	ShareDevice bool

	name     string            // the case's name
	report   func(FaultReport) // where ReportFault sends reports
	expected *expectations     // shared with the case's other ranks in this process
	pool     *hostPool         // lends the host buffers of its checked calls
}

// skipError marks a case as not applicable, with the reason.
type skipError struct{ reason string }

func (s skipError) Error() string { return "skip: " + s.reason }

// Skip returns an error that makes the runner report the case as skipped
// with the reason; every rank should return it.
func Skip(format string, args ...any) error { return skipError{fmt.Sprintf(format, args...)} }

// runGoroutines runs fn on world goroutines sharing a backend and a memory
// store, each with its Env as set then changed by adjust (when not nil);
// it returns one error per rank, a panic its rank's error.
func runGoroutines(ctx context.Context, b backend.Backend, cfg Config, world int, adjust func(*Env),
	fn func(context.Context, *Env) error) []error {
	errs := make([]error, world)
	stores, release, err := goroutineStores(ctx, cfg, world)
	if err != nil {
		for r := range errs {
			errs[r] = fmt.Errorf("creating stores: %w", err)
		}
		return errs
	}
	defer release()
	var wg sync.WaitGroup
	expected := newExpectations(world)
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("rank %d panicked: %v", r, p)
				}
			}()
			e := &Env{Rank: r, World: world, Store: stores[r], Backend: b, Timeout: cfg.Timeout, Quick: cfg.Quick,
				ShareDevice: cfg.ShareDevice, Hosts: cfg.Hosts, expected: expected, pool: cfg.pool}
			if adjust != nil {
				adjust(e)
			}
			errs[r] = fn(ctx, e)
		}()
	}
	wg.Wait()
	return errs
}

// rankEnv is the environment of rank r's process running the named case
// with the given timeout.
func rankEnv(cfg Config, world, r int, name string, timeout time.Duration) []string {
	env := []string{envChild + "=" + name, envWorld + "=" + strconv.Itoa(world),
		envBackend + "=" + cfg.Backend, envTimeout + "=" + timeout.String(),
		envQuick + "=" + strconv.FormatBool(cfg.Quick), envHosts + "=" + strconv.Itoa(cfg.Hosts)}
	if cfg.Hosts > 1 {
		// NCCL tells hosts apart by NCCL_HOSTID: each simulated host is
		// one to it, crossed by its socket transport.
		env = append(env, "NCCL_HOSTID="+SimulatedHost(r, world, cfg.Hosts))
	}
	return env
}

// runProcesses starts world children that each run the named case as one
// rank; it returns one error per rank carrying the child's output.
func runProcesses(ctx context.Context, cfg Config, world int, name string) []error {
	errs := make([]error, world)
	g, err := startRanks(ctx, cfg, world, false, cfg.Timeout, func(r int) []string {
		return rankEnv(cfg, world, r, name, cfg.Timeout)
	})
	if err != nil {
		for r := range errs {
			errs[r] = err
		}
		return errs
	}
	for _, x := range g.Wait() {
		text := strings.TrimSpace(x.Output)
		switch {
		case strings.Contains(text, skipMarker):
			_, reason, _ := strings.Cut(text, skipMarker)
			errs[x.Rank] = skipError{strings.TrimSpace(firstLine(reason))}
		case x.Err == nil:
		default:
			errs[x.Rank] = fmt.Errorf("rank %d process: %w\n%s", x.Rank, x.Err, tail(text, 4000))
		}
	}
	return errs
}

const skipMarker = "INTRANODE-CONFORMANCE-SKIP:"

// MaybeChild runs a conformance case as one rank and exits when this process
// was started by the suite in Processes mode; otherwise it returns at once.
// Call it first thing in TestMain, or in main of a program that runs the
// suite with processes.
func MaybeChild() {
	if os.Getenv(envIntruder) != "" {
		os.Exit(intruderMain())
	}
	name := os.Getenv(envChild)
	if name == "" {
		return
	}
	os.Exit(childMain(name))
}

func childMain(name string) int {
	rank, _ := launch.Rank()
	world, _ := strconv.Atoi(os.Getenv(envWorld))
	timeout, err := time.ParseDuration(os.Getenv(envTimeout))
	if err != nil {
		timeout = time.Minute
	}
	quick, _ := strconv.ParseBool(os.Getenv(envQuick))
	c, ok := caseByName(name)
	if !ok {
		fmt.Fprintf(os.Stderr, "conformance: unknown case %q\n", name)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	st, err := openChildStore(ctx, timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: rank %d: store: %v\n", rank, err)
		return 1
	}
	defer st.Close()
	b, err := backend.Open(ctx, os.Getenv(envBackend))
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: rank %d: %v\n", rank, err)
		return 1
	}
	defer b.Close()
	hosts, _ := strconv.Atoi(os.Getenv(envHosts))
	e := &Env{Rank: rank, World: world, Store: st, Backend: b, Timeout: timeout, Quick: quick, Hosts: hosts, pool: &hostPool{}}
	childFaultEnv(e, name)
	err = runFaultRank(ctx, c, e)
	var sk skipError
	if errors.As(err, &sk) {
		fmt.Fprintln(os.Stderr, skipMarker, sk.reason)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: case %s rank %d: %v\n", name, rank, err)
		return 1
	}
	return 0
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
