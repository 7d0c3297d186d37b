package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/symmetric/ipc"
	"github.com/intranode/intranode/symmetric/store"
)

// soakRankCommand is the hidden subcommand a soak rank process runs.
const soakRankCommand = "__soak-rank"

const envSoakConfig = "INTRANODE_SOAK_CONFIG"

// The chaos a soak injects, one fault per job.
const (
	chaosNone  = "none"
	chaosKill  = "kill"  // SIGKILL a random rank at a random moment
	chaosStop  = "stop"  // SIGSTOP a random rank past the call timeout, then SIGCONT
	chaosStore = "store" // close the job's TCP store server at a random moment
)

// maxWrongCalls is how many wrong calls a rank's report describes.
const maxWrongCalls = 4

// soakConfig is what every rank of one job runs; the parent passes it as
// JSON.
type soakConfig struct {
	Backend    string        `json:"backend"`
	World      int           `json:"world"`
	Store      string        `json:"store"`
	Duration   time.Duration `json:"duration"` // how long the rank makes calls
	Timeout    time.Duration `json:"timeout"`  // each call's deadline
	BufferSize int           `json:"buffer_size"`
	MaxBytes   int           `json:"max_bytes"` // largest message
	Seed       uint64        `json:"seed"`
	// ShareDevice puts every rank on device 0 (collective.Options.
	// AllowOverlap). Ranks sharing a device never make a vendor library
	// communicator, so what a survivor keeps is intranode's own.
	ShareDevice bool `json:"share_device,omitempty"`
}

// device is the device a rank of the job uses.
func (cfg soakConfig) device(rank int) int {
	if cfg.ShareDevice {
		return 0
	}
	return rank
}

// soakReport is a rank's last line: what it did and what it holds.
type soakReport struct {
	Rank  int `json:"rank"`
	Calls int `json:"calls"`
	Wrong int `json:"wrong"` // calls whose result was not exact
	// WrongCalls describes the first few of them: the call, its path,
	// how long it took, which elements were wrong.
	WrongCalls []string `json:"wrong_calls,omitempty"`
	Error      string   `json:"error,omitempty"`
	Kind       string   `json:"kind,omitempty"` // timeout, peer_failed, mismatch, closed, invalid, other
	// ErrorAt is when the rank's error came (Unix nanoseconds).
	ErrorAt int64 `json:"error_at,omitempty"`
	// EndAt is when a rank without an error stopped making calls (Unix
	// nanoseconds): a fault injected after it could not reach the rank.
	EndAt int64 `json:"end_at,omitempty"`
	// Setup says the error came while the rank was still forming its
	// group (store, device, Rendezvous), bounded by soakSetupTimeout
	// rather than by the call timeout.
	Setup bool `json:"setup,omitempty"`
	// RendezvousAt is when the rank called Rendezvous (Unix nanoseconds).
	RendezvousAt int64 `json:"rendezvous_at,omitempty"`
	// Formed marks the line a rank writes once its group is formed and
	// its buffers allocated, before its first call.
	Formed bool `json:"formed,omitempty"`
	// Resources once warm (after the first fifth of the job) and after the
	// last call, the comm still open both times.
	Start resources `json:"start"`
	End   resources `json:"end"`
	// Closed is the rank's second line, written once everything it opened
	// is closed.
	Closed *closeReport `json:"closed,omitempty"`
}

// closeReport is what a rank holds at three moments: before it opened
// anything (Opened); at its floor (Floor), once its device and the vendor
// library have been used and closed (soakWarmup), the driver's and the
// library's share for the process's life; and once the job's comm and
// everything else is closed (Released, after up to soakSettle for
// goroutines to end), CloseMs after its report. A rank that failed, or was
// stopped while its peers left, must give back all it took above its
// floor too. FloorError says why the warm-up failed, if it did.
type closeReport struct {
	CloseMs    int64  `json:"close_ms"`
	Opened     point  `json:"opened"`
	Floor      point  `json:"floor"`
	Released   point  `json:"released"`
	FloorError string `json:"floor_error,omitempty"`
}

// point is what a process holds at one moment: the counts and, by name,
// the descriptors and goroutines (what a leak is).
type point struct {
	resources
	Held held `json:"held"`
}

func readPoint(r resources) point { return point{resources: r, Held: readHeld()} }

// soakSettle bounds the wait, after a rank has closed everything, for its
// goroutines and descriptors to come back to what it held before.
const soakSettle = 2 * time.Second

// released reads the resources until they are back to before's, or
// soakSettle has passed.
func released(before resources) resources {
	return readUntil(func(r resources) bool { return r.FDs <= before.FDs && r.Goroutines <= before.Goroutines })
}

// settled reads the resources once the goroutines are back to before's
// (or soakSettle has passed): what the driver and the library keep after
// their first use is descriptors, not goroutines, so only those are
// waited for.
func settled(before resources) resources {
	return readUntil(func(r resources) bool { return r.Goroutines <= before.Goroutines })
}

// readUntil reads the resources until done accepts them or soakSettle has
// passed.
func readUntil(done func(resources) bool) resources {
	deadline := time.Now().Add(soakSettle)
	for {
		r := readResources()
		if done(r) || time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resources is what a rank process holds.
type resources struct {
	RSS        int64 `json:"rss_bytes"`
	FDs        int   `json:"fds"`
	Goroutines int   `json:"goroutines"`
}

func readResources() resources {
	r := resources{Goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			r.RSS = pages * int64(os.Getpagesize())
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		r.FDs = len(ents)
	}
	return r
}

// errorKind sorts an error for the report.
func errorKind(err error) string {
	switch {
	case errors.Is(err, collective.ErrMismatch):
		return "mismatch"
	case errors.Is(err, backend.ErrTimeout):
		return "timeout"
	case errors.Is(err, backend.ErrPeerFailed):
		return "peer_failed"
	case errors.Is(err, backend.ErrClosed):
		return "closed"
	case errors.Is(err, backend.ErrInvalidArgument):
		return "invalid"
	}
	return "other"
}

func runSoak(ctx context.Context, args []string, s streams) error {
	var c common
	fs := newFlags("soak", s)
	c.register(fs)
	world := fs.Int("world", 2, "ranks per job (processes)")
	duration := fs.Duration("duration", 30*time.Second, "how long to soak")
	chaosS := fs.String("chaos", chaosNone, "fault per job: none, kill, stop, store, or a comma-separated mix (each job draws one)")
	job := fs.Duration("job", 10*time.Second, "with --chaos: longest a job runs before its fault (drawn uniformly from a fifth of it to all of it)")
	timeout := fs.Duration("timeout", 2*time.Second, "each call's deadline; a survivor of a fault must fail within it plus 1 s")
	buffer := fs.String("buffer", "1M", "symmetric buffer per rank")
	maxB := fs.String("max", "256K", "largest message (some calls are larger than the buffer: chunked)")
	jobs := fs.Int("jobs", 0, "stop after this many jobs (0: when --duration ends)")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock)")
	share := fs.Bool("share-device", false, "every rank on device 0: what a survivor keeps is then intranode's own (ranks sharing a device never make a vendor library communicator); its call counts are no performance figure")
	rssGrowth := fs.Float64("max-rss-growth", 0.05, "largest RSS growth of a rank from its first call to its last, in jobs of 30 s or more")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *world < 2 || *world > collective.MaxDevices || *duration <= 0 || *timeout <= 0 || *jobs < 0 {
		return fmt.Errorf("%w: need 2 <= --world <= %d, positive --duration and --timeout, --jobs >= 0", errUsage, collective.MaxDevices)
	}
	var chaos []string
	for _, k := range strings.Split(*chaosS, ",") {
		if !slices.Contains([]string{chaosNone, chaosKill, chaosStop, chaosStore}, k) {
			return fmt.Errorf("%w: --chaos %q (none, kill, stop, store)", errUsage, k)
		}
		chaos = append(chaos, k)
	}
	bufBytes, err := parseBytes(*buffer)
	if err != nil {
		return err
	}
	maxBytes, err := parseBytes(*maxB)
	if err != nil {
		return err
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(*seed, 0x50a4))
	sum := soakSummary{errors: map[string]int{}}
	shared := ""
	if *share {
		shared = ", every rank on device 0"
	}
	fmt.Fprintf(s.Out, "# intranode soak: backend %s, world %d%s, %v, chaos %s, call timeout %v, seed %d\n",
		c.backend, *world, shared, *duration, *chaosS, *timeout, *seed)
	end := time.Now().Add(*duration)
	formedIn := time.Second // how long the last job took to form its group
	for n := 1; time.Until(end) > 0 && (*jobs == 0 || n <= *jobs); n++ {
		kind := chaos[rng.IntN(len(chaos))]
		length := time.Until(end)
		var faultAt time.Duration
		// A quarter of the kills come while the group forms (counted from
		// the launch, within the time the last job took to form), the
		// other faults while the ranks make calls (counted from the
		// moment every rank has formed the group).
		inSetup := kind == chaosKill && rng.IntN(4) == 0
		if inSetup {
			faultAt = time.Duration(rng.Int64N(int64(formedIn)))
		} else if kind != chaosNone {
			faultAt = soakFaultAt(rng, *job, length)
		}
		if kind != chaosNone {
			length = min(length, faultAt+*timeout+2*time.Second)
		}
		cfg := soakConfig{Backend: c.backend, World: *world, Duration: length, Timeout: *timeout, BufferSize: bufBytes,
			MaxBytes: maxBytes, Seed: rng.Uint64(), ShareDevice: *share}
		j, err := soakJob(ctx, cfg, kind, faultAt, inSetup, rng.IntN(*world), *rssGrowth)
		if err != nil {
			return err
		}
		if j.formedIn > 0 {
			formedIn = j.formedIn
		}
		sum.add(j)
		fmt.Fprintln(s.Out, j.line(n))
		if ctx.Err() != nil {
			break
		}
	}
	return sum.print(s.Out)
}

// soakFaultAt draws when a job's fault comes, counted from the moment
// every rank has formed the group: uniformly from a fifth of span to all of it, where span is job
// or, for the soak's last job, the time left if that is shorter. The
// ranks make calls for left once their group is formed, so a fault drawn
// this way finds them still calling; one drawn from all of job could come
// after the last job's ranks had stopped, and the survivors would be
// blamed for not failing.
func soakFaultAt(rng *rand.Rand, job, left time.Duration) time.Duration {
	span := max(min(job, left), 5) // a fifth of it and the rest: both positive
	return span/5 + time.Duration(rng.Int64N(int64(span*4/5)))
}

// soakResult is one job as the parent saw it.
type soakResult struct {
	kind     string // the chaos
	victim   int
	faultAt  time.Duration
	injected time.Time     // zero when no fault was injected (the job ended first)
	late     bool          // the fault came after some survivor's last call
	formedIn time.Duration // from the launch until every rank had formed the group (0: never)
	reports  map[int]soakReport
	problems []string // wrong results, hangs, leaks, missing reports
	toError  []time.Duration
}

func (j soakResult) line(n int) string {
	calls := 0
	kinds := map[string]int{}
	for _, r := range j.reports {
		calls += r.Calls
		if r.Kind != "" {
			kinds[r.Kind]++
		}
	}
	fault := "no fault"
	if !j.injected.IsZero() {
		fault = fmt.Sprintf("%s rank %d at %v", j.kind, j.victim, j.faultAt.Round(time.Millisecond))
		if j.late {
			fault += " (after some ranks' last call)"
		}
	}
	var lat []string
	for _, d := range j.toError {
		lat = append(lat, d.Round(time.Millisecond).String())
	}
	var res []string
	for _, r := range slices.Sorted(maps.Keys(j.reports)) {
		if rep := j.reports[r]; rep.Error == "" && rep.Calls > 0 {
			res = append(res, fmt.Sprintf("rank %d rss %.1f->%.1f MiB fds %d->%d goroutines %d->%d", r,
				float64(rep.Start.RSS)/(1<<20), float64(rep.End.RSS)/(1<<20), rep.Start.FDs, rep.End.FDs,
				rep.Start.Goroutines, rep.End.Goroutines))
		}
	}
	if len(res) > 0 && j.injected.IsZero() {
		fault += " (" + strings.Join(res, ", ") + ")"
	}
	verdict := "ok"
	if len(j.problems) > 0 {
		verdict = "FAILED: " + strings.Join(j.problems, "; ")
	}
	// What the first survivor was told, so that a record says how each
	// fault surfaced.
	told := ""
	for _, r := range slices.Sorted(maps.Keys(j.reports)) {
		if rep := j.reports[r]; rep.Error != "" && r != j.victim {
			e := rep.Error
			if len(e) > 240 {
				e = e[:240] + "…"
			}
			phase := ""
			if rep.Setup {
				phase = " (forming the group)"
			}
			told = fmt.Sprintf("; rank %d%s: %s", r, phase, e)
			break
		}
	}
	return fmt.Sprintf("job %d: %s; %d calls; errors %v; fault to error on survivors [%s]%s; %s",
		n, fault, calls, kinds, strings.Join(lat, " "), told, verdict)
}

// soakJob runs one job of cfg.World rank processes with its own TCP
// store, injects the fault, and judges what the ranks report.
func soakJob(ctx context.Context, cfg soakConfig, kind string, faultAt time.Duration, inSetup bool, victim int,
	rssGrowth float64) (soakResult, error) {
	j := soakResult{kind: kind, victim: victim, faultAt: faultAt, reports: map[int]soakReport{}}
	formed := make(chan struct{})
	var nFormed atomic.Int32
	var formedAt atomic.Int64
	launched := time.Now()
	srv, err := store.ListenTCP("127.0.0.1:0", store.WithTimeout(soakSetupTimeout(cfg)))
	if err != nil {
		return j, err
	}
	defer srv.Close()
	cfg.Store = "tcp://" + srv.Addr()
	raw, _ := json.Marshal(cfg)
	var stderr []string
	g, err := launch.Start(ctx, launch.Config{
		World: cfg.World,
		Args:  []string{soakRankCommand},
		// GOTRACEBACK=all: a rank killed at the deadline (SIGQUIT first)
		// shows every goroutine, the ones in C calls included.
		Env: func(int, string) []string { return []string{envSoakConfig + "=" + string(raw), "GOTRACEBACK=all"} },
		// A rank that outlives this is a hang.
		Deadline: cfg.Duration + cfg.Timeout + 15*time.Second,
		Lines: func(r int, line []byte) {
			var rep soakReport
			if err := json.Unmarshal(line, &rep); err != nil {
				stderr = append(stderr, fmt.Sprintf("rank %d: %s", r, line))
				return
			}
			if rep.Formed {
				if nFormed.Add(1) == int32(cfg.World) {
					formedAt.Store(time.Now().UnixNano())
					close(formed)
				}
				return
			}
			if rep.Closed != nil {
				if prev, ok := j.reports[r]; ok {
					prev.Closed = rep.Closed
					j.reports[r] = prev
				}
				return
			}
			j.reports[r] = rep
		},
	})
	if err != nil {
		return j, err
	}
	if kind != chaosNone && !inSetup {
		// Calls begin once every rank has formed the group (or the
		// setup has failed: the fault then comes anyway).
		select {
		case <-formed:
		case <-time.After(soakSetupTimeout(cfg) * 2):
		case <-ctx.Done():
		}
	}
	if kind != chaosNone {
		select {
		case <-time.After(faultAt):
			j.injected = time.Now()
			switch kind {
			case chaosKill:
				err = g.Signal(victim, syscall.SIGKILL)
			case chaosStop:
				if err = g.Signal(victim, syscall.SIGSTOP); err == nil {
					time.Sleep(cfg.Timeout + time.Second)
					err = g.Signal(victim, syscall.SIGCONT)
				}
			case chaosStore:
				err = srv.Close()
			}
			if err != nil {
				j.injected = time.Time{} // the rank had already ended
			}
		case <-ctx.Done():
		}
	}
	results := g.Wait()
	if at := formedAt.Load(); at != 0 {
		j.formedIn = time.Unix(0, at).Sub(launched)
	}
	for _, res := range results {
		r := res.Rank
		rep, ok := j.reports[r]
		switch {
		case res.TimedOut && ok && rep.Closed == nil:
			what := "finished its calls"
			if rep.Error != "" {
				what = fmt.Sprintf("failed (%s)", rep.Kind)
				if !j.injected.IsZero() {
					what += fmt.Sprintf(" %v after the fault", time.Unix(0, rep.ErrorAt).Sub(j.injected).Round(time.Millisecond))
				}
			}
			j.problems = append(j.problems, fmt.Sprintf("rank %d %s but hung closing (killed at the job's deadline): %s; %s",
				r, what, rep.Error, launch.HungStacks(res.Output)))
			continue
		case res.TimedOut:
			j.problems = append(j.problems, fmt.Sprintf("rank %d hung (killed at the job's deadline); %s", r, launch.HungStacks(res.Output)))
			continue
		case kind == chaosKill && r == victim && !j.injected.IsZero():
			continue // killed: no report expected
		case !ok:
			j.problems = append(j.problems, fmt.Sprintf("rank %d ended without a report (%v): %s", r, res.Err, strings.TrimSpace(res.Output)))
			continue
		}
		if rep.Wrong > 0 {
			j.problems = append(j.problems, fmt.Sprintf("rank %d: %d wrong results: %s", r, rep.Wrong, strings.Join(rep.WrongCalls, "; ")))
		}
		if rep.Error != "" && (j.injected.IsZero() || kind == chaosStore) {
			// No rank was hurt: every call should have succeeded. (A closed
			// store only ends a job that still needed it.)
			if kind != chaosStore || !strings.Contains(rep.Error, "store") {
				j.problems = append(j.problems, fmt.Sprintf("rank %d failed with no fault to explain it: %s", r, rep.Error))
			}
		}
		if c := rep.Closed; c != nil {
			if c.FloorError != "" {
				j.problems = append(j.problems, fmt.Sprintf("rank %d could not use its device and library alone: %s", r, c.FloorError))
			}
			if rel, op := c.Released, c.Floor; rel.FDs > op.FDs || rel.Goroutines > op.Goroutines {
				j.problems = append(j.problems, fmt.Sprintf("rank %d held after closing everything: %s", r, growth(op, rel)))
			}
		}
		// A stopped rank resumes after its peers have failed and left: what
		// it holds then answers their departure (a connection's reader that
		// saw the close), so its calls are not judged for leaks; what it
		// holds once closed is, above, as for every rank.
		resumed := kind == chaosStop && r == victim && !j.injected.IsZero()
		if rep.Error == "" && rep.Calls > 0 && !resumed {
			if rep.End.FDs > rep.Start.FDs || rep.End.Goroutines > rep.Start.Goroutines {
				j.problems = append(j.problems, fmt.Sprintf("rank %d leaked: descriptors %d -> %d, goroutines %d -> %d", r,
					rep.Start.FDs, rep.End.FDs, rep.Start.Goroutines, rep.End.Goroutines))
			}
			if cfg.Duration >= 30*time.Second && float64(rep.End.RSS) > float64(rep.Start.RSS)*(1+rssGrowth) {
				j.problems = append(j.problems, fmt.Sprintf("rank %d: RSS grew %d -> %d bytes", r, rep.Start.RSS, rep.End.RSS))
			}
		}
		if !j.injected.IsZero() && r != victim && rep.ErrorAt != 0 && (kind == chaosKill || kind == chaosStop) {
			d := time.Unix(0, rep.ErrorAt).Sub(j.injected)
			j.toError = append(j.toError, d)
			limit, phase := cfg.Timeout+time.Second, ""
			if rep.Setup && rep.RendezvousAt != 0 {
				// While the group forms, the survivor's deadline is its
				// Rendezvous's, which runs from its own start of it: a
				// victim that died before announcing its process can only
				// be told from a slow starter by that deadline.
				if start := time.Unix(0, rep.RendezvousAt); start.After(j.injected) {
					d = time.Unix(0, rep.ErrorAt).Sub(start)
				}
				limit, phase = soakRendezvousTimeout(cfg)+time.Second, ", forming the group (counted from the later of the fault and the survivor's Rendezvous)"
			}
			if d > limit {
				j.problems = append(j.problems, fmt.Sprintf("rank %d failed %v after the fault (limit %v%s): %s", r, d, limit, phase, rep.Error))
			}
		}
		if rep.Error == "" && !j.injected.IsZero() && r != victim && (kind == chaosKill || kind == chaosStop) {
			if time.Unix(0, rep.EndAt).Before(j.injected) {
				j.late = true // the fault came after this rank's last call: nothing to survive
			} else {
				j.problems = append(j.problems, fmt.Sprintf("rank %d survived a %s of rank %d without an error", r, kind, victim))
			}
		}
	}
	// The next job must start clean: the store's port closed and no
	// socket of an ended rank left bound.
	_ = srv.Close()
	if conn, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		_ = conn.Close()
		j.problems = append(j.problems, "the job's store still accepts connections after the job")
	}
	var pids []int
	for _, res := range results {
		pids = append(pids, res.Pid)
	}
	if left := ipc.BoundBy(pids); len(left) > 0 {
		j.problems = append(j.problems, "sockets of ended ranks still bound: "+strings.Join(left, " "))
	}
	if len(stderr) > 0 && len(j.problems) > 0 {
		j.problems = append(j.problems, strings.Join(stderr, " | "))
	}
	return j, nil
}

// soakSummary adds up the jobs.
type soakSummary struct {
	jobs, faults, calls, wrong int
	errors                     map[string]int
	toError                    []time.Duration
	failed                     []string
	// kept is what the driver and the vendor library kept in the first
	// rank that reported it (its floor above what it held at start).
	kept string
}

func (s *soakSummary) add(j soakResult) {
	s.jobs++
	if !j.injected.IsZero() {
		s.faults++
	}
	for _, r := range j.reports {
		if s.kept == "" && r.Closed != nil {
			s.kept = growth(r.Closed.Opened, r.Closed.Floor)
		}
		s.calls += r.Calls
		s.wrong += r.Wrong
		if r.Kind != "" {
			s.errors[r.Kind]++
		}
	}
	s.toError = append(s.toError, j.toError...)
	if len(j.problems) > 0 {
		s.failed = append(s.failed, fmt.Sprintf("job %d: %s", s.jobs, strings.Join(j.problems, "; ")))
	}
}

func (s *soakSummary) print(w io.Writer) error {
	sort.Slice(s.toError, func(a, b int) bool { return s.toError[a] < s.toError[b] })
	slowest := time.Duration(0)
	if n := len(s.toError); n > 0 {
		slowest = s.toError[n-1]
	}
	fmt.Fprintf(w, "# %d jobs, %d faults injected, %d calls, %d wrong results, errors by kind %v, slowest fault-to-error %v\n",
		s.jobs, s.faults, s.calls, s.wrong, s.errors, slowest.Round(time.Millisecond))
	if s.kept != "" {
		// Once per process, not per group: a leak is judged above this.
		fmt.Fprintf(w, "# kept by the driver and the vendor library once used in a rank's process: %s\n", s.kept)
	}
	if len(s.failed) > 0 {
		return fmt.Errorf("%d of %d jobs failed: %s", len(s.failed), s.jobs, strings.Join(s.failed, " || "))
	}
	fmt.Fprintln(w, "# OK: no wrong result, no hang, no leak")
	return nil
}

// soakAgreeStop all-reduces (max) one int32 saying whether this rank
// wants to stop: the ranks stop together, after the same call.
func soakAgreeStop(ctx context.Context, c *collective.Comm, s backend.Stream, flag backend.Allocation, mine bool,
	timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v := make([]byte, 4)
	if mine {
		numeric.Put(backend.Int32, v, 0, 1)
	}
	d := c.Device()
	if err := d.CopyToDevice(ctx, flag.Ptr(), v); err != nil {
		return false, err
	}
	w, err := c.AllReduce(ctx, s, flag.Ptr(), 1, backend.Int32, backend.Max, collective.OneShot)
	if err != nil {
		return false, err
	}
	defer w.Close()
	if err := w.Synchronize(ctx); err != nil {
		return false, err
	}
	if err := d.CopyFromDevice(ctx, v, flag.Ptr()); err != nil {
		return false, err
	}
	return numeric.Get(backend.Int32, v, 0) != 0, nil
}

// runSoakRank is one rank of a soak job: random calls of every collective
// until the job's duration ends or a call fails, every result checked.
func runSoakRank(ctx context.Context, _ []string, s streams) error {
	var cfg soakConfig
	rank, err := rankConfig("soak", envSoakConfig, &cfg)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(s.Out)
	var reported time.Time
	opened := readPoint(readResources())
	// What the device's driver and the vendor library keep once they have
	// been used in a process is theirs for the process's life, not a
	// leak of the job: the floor is read after this rank's device has
	// been opened and the library has made a call of this rank alone,
	// all closed again. What the job leaves above it grows with every
	// group: a leak.
	floorErr := soakWarmup(ctx, cfg, rank)
	floor := readPoint(settled(opened.resources))
	if err := soakRank(ctx, cfg, rank, func(rep soakReport) error {
		reported = time.Now()
		return enc.Encode(rep)
	}); err != nil {
		return err
	}
	// A second line once everything is closed: a rank that reported but
	// never gets here hung in Close.
	closeMs := time.Since(reported).Milliseconds()
	c := &closeReport{CloseMs: closeMs, Opened: opened, Floor: floor, Released: readPoint(released(floor.resources))}
	if floorErr != nil {
		c.FloorError = floorErr.Error()
	}
	return enc.Encode(soakReport{Rank: rank, Closed: c})
}

// soakRank runs the rank and hands its report to emit before closing what
// it opened.
func soakRank(ctx context.Context, cfg soakConfig, rank int, emit func(soakReport) error) error {
	rep := soakReport{Rank: rank}
	setup := true // until the group is formed and the buffers allocated
	fail := func(err error) error {
		rep.Error, rep.Kind, rep.ErrorAt, rep.Setup = err.Error(), errorKind(err), time.Now().UnixNano(), setup
		return emit(rep)
	}
	st, err := store.Open(ctx, cfg.Store, store.WithTimeout(soakSetupTimeout(cfg)))
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	b, err := backend.Open(ctx, cfg.Backend)
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	dev := cfg.device(rank)
	c, err := collective.New(st, rank, cfg.World, collective.Options{Backend: b, Device: &dev, BufferSize: cfg.BufferSize,
		Timeout: cfg.Timeout, AllowOverlap: cfg.ShareDevice})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	rep.RendezvousAt = time.Now().UnixNano()
	rctx, cancel := context.WithTimeout(ctx, soakRendezvousTimeout(cfg))
	err = c.Rendezvous(rctx)
	cancel()
	if err != nil {
		return fail(err)
	}
	d := c.Device()
	s, err := d.NewStream(ctx)
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	// One input and one output allocation, as large as any call needs.
	in, err := d.Alloc(ctx, cfg.MaxBytes)
	if err != nil {
		return fail(err)
	}
	defer in.Close()
	out, err := d.Alloc(ctx, cfg.MaxBytes)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	flag, err := d.Alloc(ctx, 16)
	if err != nil {
		return fail(err)
	}
	defer flag.Close()
	setup = false
	if err := emit(soakReport{Rank: rank, Formed: true}); err != nil {
		return err
	}
	// Every rank draws the same calls: same seed.
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	m := &benchMeasure{c: c, dev: d, s: s, in: in.Ptr(), out: out.Ptr(), rank: rank,
		cfg: benchConfig{World: cfg.World}}
	end := time.Now().Add(cfg.Duration)
	warmAt, warm := time.Now().Add(cfg.Duration/5), false
	for {
		// Every 16 calls the ranks agree whether to go on: each says
		// whether its clock has run out, and a max all-reduce tells all.
		if rep.Calls%16 == 0 {
			stop, err := soakAgreeStop(ctx, c, s, flag, time.Now().After(end) || ctx.Err() != nil, cfg.Timeout)
			if err != nil {
				return fail(fmt.Errorf("agreeing to go on after call %d: %w", rep.Calls, err))
			}
			if stop {
				break
			}
		}
		m.coll = collective.Ops[rng.IntN(len(collective.Ops))]
		m.cfg.DType = backend.DTypes[rng.IntN(len(backend.DTypes))]
		ops := []backend.ReduceOp{backend.Sum, backend.Max, backend.Min, backend.Avg}
		if !numeric.VendorAvgExact(cfg.World) {
			ops = ops[:3] // the check compares with the exact quotient
		}
		m.cfg.Op = ops[rng.IntN(len(ops))]
		inPlace := rng.IntN(2) == 0
		div := 1
		if m.coll == collective.OpReduceScatter || m.coll == collective.OpAllGather || m.coll == collective.OpAllToAll {
			div = cfg.World
		}
		count := 1 + rng.IntN(max(1, cfg.MaxBytes/m.cfg.DType.Size()/div))
		algo := collective.Direct
		if m.coll == collective.OpAllReduce {
			algo = []collective.Algo{collective.None, collective.OneShot, collective.TwoShot, collective.Pipeline}[rng.IntN(4)]
			if algo != collective.None && algo != collective.Pipeline && count > c.Capacity(algo, m.cfg.DType) {
				algo = collective.None
			}
		} else {
			algo = []collective.Algo{collective.Direct, collective.Direct, collective.Pipeline, collective.None, collective.Copy}[rng.IntN(5)]
			// The copy engines read the input from the symmetric buffer
			// and write no output there: out of place, where the bench
			// would run them.
			if algo == collective.Copy {
				if _, why := m.algo("copy", count); inPlace || why != "" {
					algo = collective.Direct
				}
			}
		}
		m.symmetric = algo == collective.Copy
		seed := rep.Calls + 1
		began := time.Now()
		cctx, ccancel := context.WithTimeout(ctx, cfg.Timeout)
		err := m.fill(cctx, count, seed, inPlace)
		if err == nil {
			// Work.Synchronize, not the stream's: a call still running at
			// its deadline fails the comm and stops the vendor library's
			// kernels, so that the frees after it do not wait for them.
			var w *collective.Work
			if w, err = m.start(cctx, algo, count, inPlace); err == nil {
				err = errors.Join(w.Synchronize(cctx), w.Close())
			}
		}
		if err == nil {
			err = c.CheckStatus()
		}
		var wrong int
		var first *numeric.Mismatch
		if err == nil {
			wrong, first, err = m.compare(cctx, algo, count, seed, inPlace)
		}
		ccancel()
		if err != nil {
			return fail(fmt.Errorf("call %d (%v %d×%v, %v): %w", rep.Calls+1, m.coll, count, m.cfg.DType, algo, err))
		}
		if wrong > 0 {
			rep.Wrong++
			if len(rep.WrongCalls) < maxWrongCalls {
				_, n := m.coll.Elements(count, cfg.World)
				rep.WrongCalls = append(rep.WrongCalls, fmt.Sprintf("call %d (%v %d×%v %v, %v, in place %v, ended %v after it began): %d of %d elements wrong, the first %v",
					rep.Calls+1, m.coll, count, m.cfg.DType, m.cfg.Op, algo, inPlace, time.Since(began).Round(time.Microsecond), wrong, n, first))
			}
		}
		rep.Calls++
		// The starting point: after the first call, then again once a
		// fifth of the job has passed (the heap has grown to its working
		// size by then, so what grows after it is what leaks).
		if rep.Calls == 1 || (!warm && time.Now().After(warmAt)) {
			rep.Start = readResources()
			warm = rep.Calls > 1
		}
	}
	rep.EndAt = time.Now().UnixNano()
	rep.End = readResources()
	return emit(rep)
}

// soakWarmup opens the rank's device, allocates and makes one all-reduce
// through the backend's own library where it has one and the job will
// use it (warmLibrary: not when ranks share a device), and
// closes everything, so that what the driver and the library keep for the
// process's life is taken before the soak's floor is read.
func soakWarmup(ctx context.Context, cfg soakConfig, rank int) (err error) {
	ctx, cancel := context.WithTimeout(ctx, soakSetupTimeout(cfg))
	defer cancel()
	b, err := backend.Open(ctx, cfg.Backend)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	d, err := b.Open(ctx, cfg.device(rank))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	s, err := d.NewStream(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	buf, err := d.Alloc(ctx, 4096)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, buf.Close()) }()
	if ihb, ok := b.(collective.InterHostBackend); ok && !cfg.ShareDevice {
		return warmLibrary(ctx, ihb, s, buf.Ptr(), rank)
	}
	return nil
}

// warmLibrary makes one all-reduce on s through a communicator of this
// rank alone of the backend's library (collective.InterHostBackend) and
// closes it.
func warmLibrary(ctx context.Context, ihb collective.InterHostBackend, s backend.Stream, buf backend.DevicePtr, rank int) (err error) {
	st, err := store.Open(ctx, "mem://")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	ih, err := ihb.NewInterHost(ctx, collective.InterHostConfig{Store: st, Name: "soak-warmup", Rank: 0, World: 1, Device: rank})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ih.Close()) }()
	if err := ih.AllReduce(ctx, s, buf, buf, 1024, backend.Float32, backend.Sum); err != nil {
		return err
	}
	return s.Synchronize(ctx)
}

// soakRendezvousTimeout is the deadline a rank gives Rendezvous, once it
// has its store and its device: the call timeout, or 2 s if that is
// shorter (the ranks' processes start at slightly different moments).
// A survivor of a kill while the group forms must fail within it plus
// 1 s of the later of the kill and its own start of Rendezvous.
func soakRendezvousTimeout(cfg soakConfig) time.Duration { return max(cfg.Timeout, 2*time.Second) }

// soakSetupTimeout bounds forming a job's group: opening the store, and
// Rendezvous once every rank has its device (starting a process and a
// driver context takes a second or so on a GPU host, longer under -race).
func soakSetupTimeout(cfg soakConfig) time.Duration { return cfg.Timeout + 5*time.Second }
