package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/symmetric/store"
)

// benchRankCommand is the hidden subcommand a bench rank process runs.
const benchRankCommand = "__bench-rank"

// benchConfig is what every rank runs; the parent passes it as JSON.
type benchConfig struct {
	Backend string           `json:"backend"`
	World   int              `json:"world"`
	Sizes   []int            `json:"sizes"`
	DType   backend.DType    `json:"dtype"`
	Op      backend.ReduceOp `json:"op"`
	// Colls are the collectives measured, in order.
	Colls  []collective.Op `json:"colls"`
	Algos  []string        `json:"algos"` // "oneshot", "twoshot", "hcm", "pipeline", "direct", "nccl", "auto"
	Iters  int             `json:"iters"`
	Warmup int             `json:"warmup"`
	Graph  bool            `json:"graph"`
	// Single times one call at a time, as a program making one call and
	// waiting for it sees: each call (with Graph, each launch of a graph
	// of one call) is waited for before the next, on the host's clock.
	// Without it the Iters calls are chained: each is enqueued while the
	// previous runs, and the device's time for all of them is divided.
	Single bool `json:"single,omitempty"`
	// Replays (at least 1) is how many times the timed iterations run, each
	// after a barrier; the median is reported. A graph is replayed once untimed
	// first (its first launch uploads it to the device).
	Replays int `json:"replays"`
	// CPUProfile, when set, is where rank 0 writes its Go CPU profile.
	CPUProfile string        `json:"cpu_profile,omitempty"`
	InPlace    bool          `json:"inplace"`
	BufferSize int           `json:"buffer_size"`
	Timeout    time.Duration `json:"timeout"`
	// Store is the rendezvous store URL every rank opens; Prefix keeps
	// this run's keys apart from anything else in that store.
	Store  string `json:"store"`
	Prefix string `json:"prefix"`
	// ShareDevice puts every rank on device 0 (a correctness run).
	ShareDevice bool `json:"share_device,omitempty"`
	// Verbose has each rank log at debug level to its standard output,
	// which the parent prints with the rank: the comm's rendezvous phases
	// among them.
	Verbose bool `json:"verbose,omitempty"`
	// Hosts, above 1, splits the ranks into simulated hosts and measures
	// the collectives across hosts (bench_hosts.go).
	Hosts int `json:"hosts,omitempty"`
	// NoCallCheck turns off HostGroups' call check across hosts.
	NoCallCheck bool `json:"no_call_check,omitempty"`

	// anchor is the same-run reference the table's header prints (the
	// parent measures it after the ranks; it never travels to them).
	anchor string
}

// benchSample is one rank's measurement of one (size, algo, placement).
type benchSample struct {
	Coll    string  `json:"coll"`
	Rank    int     `json:"rank"`
	Bytes   int     `json:"bytes"`
	Algo    string  `json:"algo"`
	InPlace bool    `json:"inplace"`
	TimeUS  float64 `json:"time_us"`
	Wrong   int     `json:"wrong"`
	Skipped string  `json:"skipped,omitempty"`
}

// runBenchRank is the child side: it reads the config from the
// environment, meets the other ranks through the TCP store the parent
// serves, and prints one JSON sample per line.
func runBenchRank(ctx context.Context, args []string, s streams) error {
	var cfg benchConfig
	rank, err := rankConfig("bench", envBenchConfig, &cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	st, err := openBenchStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := backend.Open(ctx, cfg.Backend)
	if err != nil {
		return err
	}
	defer b.Close()
	enc := json.NewEncoder(s.Out)
	if rank == 0 {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return benchRank(ctx, cfg, rank, st, b, func(smp benchSample) error { return enc.Encode(smp) })
}

// rankConfig is how a rank process of command (bench, soak) starts: its
// config, JSON in the environment variable env, and its rank from the
// launcher.
func rankConfig(command, env string, cfg any) (int, error) {
	if err := json.Unmarshal([]byte(os.Getenv(env)), cfg); err != nil {
		return 0, fmt.Errorf("%s rank: bad config: %w", command, err)
	}
	rank, ok := launch.Rank()
	if !ok {
		return 0, fmt.Errorf("%s rank: no rank in %s (the command is started by intranode %s)", command, launch.EnvRank, command)
	}
	return rank, nil
}

// startCPUProfile writes this process's Go CPU profile to path until stop
// is called; an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// rendezvousSample is the Algo of the sample that carries Rendezvous time.
const rendezvousSample = "rendezvous"

// deviceOpenSample is the Algo of the sample that carries the time to open
// the device (creating its driver context) before Rendezvous.
const deviceOpenSample = "device-open"

const (
	envBenchConfig = "INTRANODE_BENCH_CONFIG"
)

// benchRank measures every size and algorithm on one rank.
func benchRank(ctx context.Context, cfg benchConfig, rank int, st store.Store, b backend.Backend, emit func(benchSample) error) error {
	if cfg.Hosts > 1 {
		return benchHostsRank(ctx, cfg, rank, st, b, emit)
	}
	dev := rank
	if cfg.ShareDevice {
		dev = 0
	}
	var log *slog.Logger
	if cfg.Verbose {
		log = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := collective.New(st, rank, cfg.World, collective.Options{Backend: b, Device: &dev, AllowOverlap: cfg.ShareDevice,
		BufferSize: cfg.BufferSize, Timeout: cfg.Timeout, Logger: log})
	if err != nil {
		return err
	}
	defer c.Close()
	// Open the device first, as any program does before it forms a
	// group (its tensors live there): the driver context is created here,
	// and Rendezvous is measured without it.
	open := time.Now()
	warm, err := b.Open(ctx, dev)
	if err != nil {
		return err
	}
	defer warm.Close()
	if err := emit(benchSample{Rank: rank, Algo: deviceOpenSample, TimeUS: float64(time.Since(open).Nanoseconds()) / 1e3}); err != nil {
		return err
	}
	// Every rank's device is open before any rank starts the clock, so
	// that the rendezvous is measured without the skew of a peer still
	// creating its driver context (hundreds of ms at world 8).
	if err := deviceOpenBarrier(ctx, st, rank, cfg.World); err != nil {
		return fmt.Errorf("waiting for every rank to open its device: %w", err)
	}
	start := time.Now()
	if err := c.Rendezvous(ctx); err != nil {
		return err
	}
	// The first sample reports what forming the group cost this rank.
	if err := emit(benchSample{Rank: rank, Algo: rendezvousSample, TimeUS: float64(time.Since(start).Nanoseconds()) / 1e3}); err != nil {
		return err
	}
	d := c.Device()
	in, out, s, release, err := benchBuffers(ctx, d, slices.Max(cfg.Sizes))
	if err != nil {
		return err
	}
	defer release()
	timing := b.Capabilities().Has(backend.CapTiming)
	graphs := b.Capabilities().Has(backend.CapGraphs)
	if cfg.Graph && !graphs {
		return backend.Errorf(backend.CodeNotSupported, "backend %s cannot capture graphs", b.Name())
	}
	m := &benchMeasure{c: c, dev: d, s: s, in: in.Ptr(), out: out.Ptr(), cfg: cfg, rank: rank, timing: timing}
	if err := m.spinUp(ctx); err != nil {
		return fmt.Errorf("spinning up: %w", err)
	}
	for _, coll := range cfg.Colls {
		m.coll = coll
		div := sizeDivisor(coll, cfg.World)
		for _, size := range cfg.Sizes {
			count := size / cfg.DType.Size() / div
			if count == 0 {
				continue
			}
			for _, name := range cfg.Algos {
				placements := []bool{false}
				if cfg.InPlace {
					placements = append(placements, true)
				}
				for _, inPlace := range placements {
					smp := benchSample{Coll: coll.String(), Rank: rank, Bytes: count * div * cfg.DType.Size(), Algo: name,
						InPlace: inPlace}
					algo, why := m.algo(name, count)
					if algo == collective.Copy && inPlace && why == "" {
						why = "in place (its output would be the symmetric buffer)"
					}
					m.vendorOnly, m.symmetric = name == "nccl", algo == collective.Copy
					if why != "" {
						smp.Skipped = why
					} else if smp.TimeUS, smp.Wrong, err = m.run(ctx, algo, count, m.nextSeed(), inPlace); err != nil {
						return fmt.Errorf("%v %d bytes %s: %w", coll, size, name, err)
					}
					if err := emit(smp); err != nil {
						return err
					}
				}
			}
		}
	}
	return c.Barrier(ctx)
}

// Spin-up before the first row: without it the first row of a run came
// out two to ten times slow whichever algorithm it timed (fake backend,
// world 2 processes, 1 KiB: 21.8, 51.8 and 5.2 µs for the first of three
// orders of the same three algorithms, 3.3–5.9 µs after; a row's own
// --warmup of 100 calls was not enough, 1,000 were). spinUpBytes bounds
// the bytes it moves, so that a run starting at large sizes spends little.
const (
	spinUpCalls = 1000
	spinUpBytes = 64 << 20
)

// spinUp makes untimed calls of the run's first collective at its
// smallest size with the comm's choice of algorithm, as many on every
// rank, and waits for them.
func (m *benchMeasure) spinUp(ctx context.Context) error {
	m.coll = m.cfg.Colls[0]
	div := sizeDivisor(m.coll, m.cfg.World)
	size := slices.Min(m.cfg.Sizes)
	count := size / m.cfg.DType.Size() / div
	if count == 0 {
		return nil
	}
	algo, why := m.algo("auto", count)
	if why != "" {
		return nil
	}
	for range min(spinUpCalls, max(1, spinUpBytes/size)) {
		if err := m.call(ctx, algo, count, false); err != nil {
			return err
		}
	}
	if err := m.s.Synchronize(ctx); err != nil {
		return err
	}
	return m.c.CheckStatus()
}

// sizeDivisor turns a row's size, nccl-tests' whole message, into a
// rank's count: the message over the ranks where the collective splits
// it (reduce-scatter's input, all-gather's output, all-to-all's sends).
func sizeDivisor(coll collective.Op, world int) int {
	if coll == collective.OpReduceScatter || coll == collective.OpAllGather || coll == collective.OpAllToAll {
		return world
	}
	return 1
}

// benchBuffers allocates a rank's input and output of n bytes each on d
// and a stream; release frees them.
func benchBuffers(ctx context.Context, d backend.Device, n int) (in, out backend.Allocation, s backend.Stream, release func(), err error) {
	var closers []io.Closer
	release = func() {
		for _, c := range slices.Backward(closers) {
			_ = c.Close()
		}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	if in, err = d.Alloc(ctx, n); err != nil {
		return
	}
	closers = append(closers, in)
	if out, err = d.Alloc(ctx, n); err != nil {
		return
	}
	closers = append(closers, out)
	if s, err = d.NewStream(ctx); err != nil {
		return
	}
	closers = append(closers, s)
	return in, out, s, release, nil
}

type benchMeasure struct {
	coll    collective.Op // the collective measured now
	c       *collective.Comm
	dev     backend.Device
	s       backend.Stream
	in, out backend.DevicePtr
	cfg     benchConfig
	rank    int
	timing  bool
	input   []byte
	row     int // rows measured so far: each row's input has a seed of its own
	// vendorOnly measures the vendor library alone (the nccl rows): its
	// calls leave out the ranks' confirmation (collective.WithoutConfirm).
	vendorOnly bool
	// symmetric puts the input at the start of the comm's symmetric
	// buffer (the copy rows: collective.Copy reads it there).
	symmetric bool
}

// placement returns where a call of count elements per rank reads and
// writes: out of place m.in and m.out; in place one buffer, m.in, laid out
// as NCCL lays in-place calls out (the input is the output's block Rank for
// all-gather, the output the input's block Rank for reduce-scatter).
func (m *benchMeasure) placement(count int, inPlace bool) (in, out backend.DevicePtr) {
	if m.symmetric {
		return m.c.Memory().Buffer(m.rank), m.out
	}
	if !inPlace {
		return m.in, m.out
	}
	block := m.in.Add(m.rank * count * m.cfg.DType.Size())
	switch m.coll {
	case collective.OpReduceScatter:
		return m.in, block
	case collective.OpAllGather:
		return block, m.in
	}
	return m.in, m.in
}

// nextSeed is the seed of the next row's input. Every rank measures the
// same rows in the same order, so their seeds agree; no two rows share
// one, so no row can pass on what an earlier row left in the output.
func (m *benchMeasure) nextSeed() int {
	m.row++
	return m.row
}

// poisonByte fills every byte of a poisoned buffer. As an element of any
// dtype it is a value no correct result of the bench's inputs (small
// integers, summed over at most a few ranks) can hold: a NaN in float16, a
// number near the largest finite one in bfloat16, float32 and float64,
// 2139062143 in int32.
const poisonByte = 0x7f

// poison overwrites where a call of count elements per rank writes (out
// of place the output; in place the whole buffer, input included) with
// poisonByte.
func (m *benchMeasure) poison(ctx context.Context, count int, inPlace bool) error {
	inN, outN := m.coll.Elements(count, m.cfg.World)
	dst, n := m.out, outN
	if inPlace {
		dst, n = m.in, max(inN, outN)
	}
	return m.dev.CopyToDevice(ctx, dst, bytes.Repeat([]byte{poisonByte}, n*m.cfg.DType.Size()))
}

// fill writes the pattern input of a call of count elements per rank
// where placement puts the input.
func (m *benchMeasure) fill(ctx context.Context, count, seed int, inPlace bool) error {
	n, _ := m.coll.Elements(count, m.cfg.World)
	m.input = make([]byte, n*m.cfg.DType.Size())
	numeric.Pattern(m.cfg.DType, m.input, n, m.rank, seed)
	in, _ := m.placement(count, inPlace)
	return m.dev.CopyToDevice(ctx, in, m.input)
}

// algo resolves a name to a path for the collective measured, or says why
// it cannot run.
func (m *benchMeasure) algo(name string, count int) (collective.Algo, string) {
	d := m.cfg.DType
	switch name {
	case "auto":
		return m.c.SelectReduction(m.coll, count, d, m.cfg.Op), ""
	case "nccl":
		// The vendor library, reached through the fallback path.
		_, all := m.c.Backend().(collective.FallbackAllReducer)
		_, movers := m.c.Backend().(collective.FallbackMover)
		if m.coll == collective.OpAllReduce && !all || m.coll != collective.OpAllReduce && !movers {
			return 0, "backend has no vendor " + m.coll.String()
		}
		return collective.None, ""
	}
	a, err := collective.ParseAlgo(name)
	if err != nil {
		return 0, err.Error()
	}
	if m.coll != collective.OpAllReduce {
		in, _ := m.coll.Elements(count, m.cfg.World)
		switch {
		case a == collective.Copy && m.coll == collective.OpReduceScatter:
			return 0, "the copy engines cannot reduce"
		case a == collective.Copy && in*d.Size() > m.c.BufferSize():
			return 0, "input larger than the buffer"
		case a != collective.Direct && a != collective.Pipeline && a != collective.Copy:
			return 0, "an all-reduce algorithm"
		}
		return a, ""
	}
	switch {
	case a == collective.Direct || a == collective.Copy:
		return 0, "not an all-reduce algorithm"
	case a == collective.HCM && m.c.Topology().String() != "HybridCubeMesh":
		return 0, "needs a hybrid cube mesh"
	case count > m.c.Capacity(a, d):
		return 0, "larger than the buffer"
	}
	return a, ""
}

// call enqueues one call of the collective measured.
func (m *benchMeasure) call(ctx context.Context, algo collective.Algo, count int, inPlace bool) error {
	w, err := m.start(ctx, algo, count, inPlace)
	if err != nil {
		return err
	}
	return w.Close()
}

// start enqueues one call of the measured collective and returns its Work.
func (m *benchMeasure) start(ctx context.Context, algo collective.Algo, count int, inPlace bool) (*collective.Work, error) {
	in, out := m.placement(count, inPlace)
	d, red := m.cfg.DType, m.cfg.Op
	var opts []collective.CallOption
	if m.vendorOnly {
		opts = append(opts, collective.WithoutConfirm())
	}
	var w *collective.Work
	var err error
	switch m.coll {
	case collective.OpAllReduce:
		if !inPlace {
			opts = append(opts, collective.Output(out))
		}
		w, err = m.c.AllReduce(ctx, m.s, in, count, d, red, algo, opts...)
	case collective.OpReduceScatter:
		w, err = m.c.ReduceScatter(ctx, m.s, in, out, count, d, red, algo, opts...)
	case collective.OpAllGather:
		w, err = m.c.AllGather(ctx, m.s, in, out, count, d, algo, opts...)
	case collective.OpBroadcast:
		w, err = m.c.Broadcast(ctx, m.s, in, count, d, 0, algo, append(opts, collective.Output(out))...)
	case collective.OpAllToAll:
		w, err = m.c.AllToAll(ctx, m.s, in, out, count, d, algo, opts...)
	}
	return w, err
}

// run times cfg.Iters calls after cfg.Warmup and checks the result.
func (m *benchMeasure) run(ctx context.Context, algo collective.Algo, count, seed int, inPlace bool) (float64, int, error) {
	if err := m.fill(ctx, count, seed, inPlace); err != nil {
		return 0, 0, err
	}
	call := func() error { return m.call(ctx, algo, count, inPlace) }
	for range m.cfg.Warmup {
		if err := call(); err != nil {
			return 0, 0, err
		}
	}
	var graph backend.Graph
	if m.cfg.Graph {
		if err := m.s.BeginCapture(); err != nil {
			return 0, 0, err
		}
		captured := m.cfg.Iters
		if m.cfg.Single {
			captured = 1
		}
		var cerr error
		for range captured {
			if cerr = call(); cerr != nil {
				break
			}
		}
		g, err := m.s.EndCapture()
		if err = errors.Join(cerr, err); err != nil {
			return 0, 0, err
		}
		graph = g
		defer graph.Close()
	}
	if err := m.s.Synchronize(ctx); err != nil {
		return 0, 0, err
	}
	if err := m.c.CheckStatus(); err != nil {
		return 0, 0, err
	}
	enqueue := func() error {
		if graph != nil {
			return graph.Launch(m.s)
		}
		for range m.cfg.Iters {
			if err := call(); err != nil {
				return err
			}
		}
		return nil
	}
	timed := m.timed
	if m.cfg.Single {
		one := call
		if graph != nil {
			one = func() error { return graph.Launch(m.s) }
		}
		enqueue = func() error { return one() }
		timed = m.timedSingly
	}
	if graph != nil {
		// The first launch of a graph uploads it: not part of a replay.
		if err := enqueue(); err != nil {
			return 0, 0, err
		}
	}
	// Collect the garbage of the checks and fills before the timed replays,
	// as testing.B does before a benchmark: with the fake backend the
	// kernels run in this process, and a collection that falls in a replay
	// is time the kernels did not take.
	runtime.GC()
	times := make([]time.Duration, 0, m.cfg.Replays)
	for range m.cfg.Replays {
		if err := m.s.Synchronize(ctx); err != nil {
			return 0, 0, err
		}
		if err := m.c.Barrier(ctx); err != nil {
			return 0, 0, err
		}
		elapsed, err := timed(ctx, enqueue)
		if err != nil {
			return 0, 0, err
		}
		times = append(times, elapsed)
	}
	slices.Sort(times)
	elapsed := times[len(times)/2]
	if err := m.c.CheckStatus(); err != nil {
		return 0, 0, err
	}
	// Check one more call of the row's own: its output poisoned first (in
	// place, the whole buffer, then the input written afresh), so that
	// only what this call writes can pass, not what the timed calls or an
	// earlier row left there. The barrier keeps a peer from writing into
	// this rank's output before it is poisoned.
	if err := m.poison(ctx, count, inPlace); err != nil {
		return 0, 0, err
	}
	if err := m.fill(ctx, count, seed, inPlace); err != nil {
		return 0, 0, err
	}
	if err := m.c.Barrier(ctx); err != nil {
		return 0, 0, err
	}
	if err := call(); err != nil {
		return 0, 0, err
	}
	if err := m.s.Synchronize(ctx); err != nil {
		return 0, 0, err
	}
	if err := m.c.CheckStatus(); err != nil {
		return 0, 0, err
	}
	wrong, _, err := m.compare(ctx, algo, count, seed, inPlace)
	if err != nil {
		return 0, 0, err
	}
	return float64(elapsed.Nanoseconds()) / 1e3 / float64(m.cfg.Iters), wrong, nil
}

// timing says how the run times its calls: chained or one at a time,
// eagerly or from graphs (the three latencies a program can see).
func (cfg benchConfig) timing() string {
	switch {
	case cfg.Graph && cfg.Single:
		return "one call per graph launch, each waited for"
	case cfg.Graph:
		return "graph replay, chained"
	case cfg.Single:
		return "eager launches, each waited for"
	}
	return "eager launches, chained"
}

// compare counts the wrong elements of the output of the last call, made
// on path algo, and returns the first (nil when none is). The comm's
// kernels must match the reference bit for bit; the vendor library's
// average is held to numeric.VendorAvgBound where it is not exact
// (numeric.VendorAvgExact).
func (m *benchMeasure) compare(ctx context.Context, algo collective.Algo, count, seed int, inPlace bool) (int, *numeric.Mismatch, error) {
	_, dst := m.placement(count, inPlace)
	_, n := m.coll.Elements(count, m.cfg.World)
	d := m.cfg.DType
	got := make([]byte, n*d.Size())
	if err := m.dev.CopyFromDevice(ctx, got, dst); err != nil {
		return 0, nil, err
	}
	want := make([]byte, len(got))
	pattern := func(r, j int) float64 { return numeric.PatternValue(r, seed, j) }
	fold := func(a, b float64) float64 { return numeric.Combine(m.cfg.Op.Reduced(), a, b) }
	// Only a reducing collective's output (every element of it) is
	// reduced; the others copy, whatever the op.
	op := backend.Sum
	if m.coll.Reduces() {
		op = m.cfg.Op
	}
	numeric.EncodeFunc(d, want, n, func(i int) float64 {
		return numeric.Finish(d, op, m.cfg.World, m.coll.Reference(pattern, fold, m.cfg.World, m.rank, 0, count, i))
	})
	if op != backend.Avg || algo != collective.None || numeric.VendorAvgExact(m.cfg.World) {
		wrong, first := numeric.Compare(d, got, want, n)
		return wrong, first, nil
	}
	magnitude := func(r, j int) float64 { return math.Abs(pattern(r, j)) }
	add := func(a, b float64) float64 { return a + b }
	wrong, first := numeric.CompareWithin(d, got, want, n, func(i int) float64 {
		abs := m.coll.Reference(magnitude, add, m.cfg.World, m.rank, 0, count, i)
		return numeric.VendorAvgBound(d, m.cfg.World, abs)
	})
	return wrong, first, nil
}

// timedSingly runs enqueue (one call) cfg.Iters times, waiting for each
// before the next, and returns the host time all of them took.
func (m *benchMeasure) timedSingly(ctx context.Context, enqueue func() error) (time.Duration, error) {
	start := time.Now()
	for range m.cfg.Iters {
		if err := enqueue(); err != nil {
			return 0, err
		}
		if err := m.s.Synchronize(ctx); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// timed runs enqueue and returns the device time it took: from events
// where the backend has timing events, else the host clock around a
// synchronised stream.
func (m *benchMeasure) timed(ctx context.Context, enqueue func() error) (time.Duration, error) {
	if !m.timing {
		start := time.Now()
		if err := enqueue(); err != nil {
			return 0, err
		}
		if err := m.s.Synchronize(ctx); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	start, err := m.dev.NewEvent(ctx, true)
	if err != nil {
		return 0, err
	}
	defer start.Close()
	end, err := m.dev.NewEvent(ctx, true)
	if err != nil {
		return 0, err
	}
	defer end.Close()
	if err := m.s.Record(start); err != nil {
		return 0, err
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	if err := m.s.Record(end); err != nil {
		return 0, err
	}
	if err := end.Synchronize(ctx); err != nil {
		return 0, err
	}
	return end.Elapsed(start)
}

// openBenchStore opens the run's store as one rank sees it: the URL, under
// the run's prefix.
func openBenchStore(ctx context.Context, cfg benchConfig) (store.Store, error) {
	return store.OpenPrefixed(ctx, cfg.Store, cfg.Prefix, store.WithTimeout(cfg.Timeout))
}

// deviceOpenBarrier returns once every rank of world has reached it (a
// store.Exchange barrier of its own).
func deviceOpenBarrier(ctx context.Context, st store.Store, rank, world int) error {
	ex, err := store.NewExchange(st, "bench/device-open", rank, world)
	if err != nil {
		return err
	}
	return errors.Join(ex.Barrier(ctx), ex.Close(ctx))
}
