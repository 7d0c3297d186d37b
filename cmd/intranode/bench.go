package main

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/symmetric/store"
)

// benchRow is one line of the table: a size and algorithm, aggregated over
// ranks (the slowest rank's time, the sum of wrong elements).
type benchRow struct {
	Coll    string  `json:"collective"`
	Bytes   int     `json:"bytes"`
	Count   int     `json:"count"`
	Type    string  `json:"type"`
	Op      string  `json:"redop"`
	Algo    string  `json:"algo"`
	InPlace bool    `json:"inplace"`
	TimeUS  float64 `json:"time_us"`
	AlgBW   float64 `json:"algbw_gbps"`
	BusBW   float64 `json:"busbw_gbps"`
	Wrong   int     `json:"wrong"`
	Skipped string  `json:"skipped,omitempty"`
}

func runBench(ctx context.Context, args []string, s streams) error {
	var c common
	fs := newFlags("bench", s)
	c.register(fs)
	world := fs.Int("world", 2, "number of ranks (one device each)")
	minB := fs.String("b", "1K", "smallest message size in bytes (K, M, G suffixes)")
	maxB := fs.String("e", "4M", "largest message size in bytes")
	factor := fs.Int("f", 4, "size multiplication factor between rows")
	dtypeS := fs.String("dtype", "bfloat16", "element type: float, half, bfloat16, double, int32")
	collS := fs.String("op", "all_reduce", "collectives, comma-separated: all_reduce, reduce_scatter, all_gather, broadcast, alltoall, or all")
	opS := fs.String("redop", "sum", "reduction: sum, max, min, avg")
	algoS := fs.String("algo", "all", "all, auto (the comm's choice per size), or a list of oneshot,twoshot,hcm,pipeline (all-reduce; pipeline also the other collectives' pipelined kernels), direct (the other collectives' kernels), copy (all-gather, broadcast, all-to-all on the copy engines, the input in the symmetric buffer: rows up to --buffer), nccl")
	iters := fs.Int("iters", 20, "timed iterations per row")
	warmup := fs.Int("warmup", 5, "untimed iterations before timing")
	graph := fs.Bool("graph", false, "capture the timed iterations into a graph and replay it")
	single := fs.Bool("single", false, "time one call at a time: wait for each call (with --graph, each launch of a graph of one call) before the next, on the host's clock; without it the calls are chained")
	replays := fs.Int("replays", 5, "timed runs of the iterations per row (each after a barrier); the median is reported")
	inPlace := fs.Bool("inplace", false, "also measure in-place")
	buffer := fs.String("buffer", "10M", "symmetric buffer per rank")
	procs := fs.Bool("procs", true, "run ranks as separate processes (false: goroutines)")
	share := fs.Bool("share-device", false, "every rank on device 0, as goroutines of this process: checks results on one GPU; its times are no performance figure (implies --procs=false)")
	asCSV := fs.Bool("csv", false, "print CSV instead of the table")
	asJSON := fs.Bool("json", false, "print JSON instead of the table")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run")
	plot := fs.String("plot", "", "also write an SVG chart (latency and bus bandwidth against size) to this file")
	cpuProfile := fs.String("cpuprofile", "", "write rank 0's Go CPU profile (runtime/pprof) of the whole run to this file")
	storeURL := storeFlag(fs, "a TCP store this command serves on loopback with --procs, an in-process one without")
	hosts := fs.Int("hosts", 1, "split the ranks into this many simulated hosts (host by host, device = rank) and measure the collectives across hosts:\n"+
		"--algo hier (inside each host, then across), flat (the inter-host engine across every rank) and auto (the choice by size), eager calls, wall clock")
	callCheck := fs.Bool("call-check", true, "with --hosts: HostGroups' call check across hosts (one small all-gather per call on the inter-host engine; false: HostGroups.NoCallCheck)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	hostAlgos, err := benchHostsFlags(*hosts, *world, *algoS, *collS, *graph, *share)
	if err != nil {
		return err
	}
	if hostAlgos != nil {
		*algoS = "auto" // replaced below
	}
	if *replays < 1 {
		return fmt.Errorf("%w: --replays %d: need at least 1", errUsage, *replays)
	}
	cfg, err := benchSetup(c.backend, *world, *minB, *maxB, *factor, *dtypeS, *opS, *algoS, *iters, *warmup, *buffer)
	if err != nil {
		return err
	}
	if cfg.Colls, err = parseColls(*collS); err != nil {
		return err
	}
	if hostAlgos != nil {
		cfg.Hosts, cfg.Algos, cfg.NoCallCheck = *hosts, hostAlgos, !*callCheck
	}
	cfg.Graph, cfg.Single, cfg.InPlace, cfg.Timeout, cfg.Store = *graph, *single, *inPlace, *timeout, *storeURL
	cfg.Replays, cfg.Verbose = *replays, c.verbose
	if *share {
		if *asCSV || *asJSON || *plot != "" {
			return fmt.Errorf("%w: --share-device prints only the table, every line of it labelled a correctness run", errUsage)
		}
		cfg.ShareDevice, *procs = true, false
	}
	if *cpuProfile != "" {
		abs, err := filepath.Abs(*cpuProfile)
		if err != nil {
			return err
		}
		cfg.CPUProfile = abs
	}
	if err := checkStoreURL(cfg.Store, *procs); err != nil {
		return err
	}
	nonce := make([]byte, 8)
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	cfg.Prefix = fmt.Sprintf("intranode-bench/%x/", nonce)
	b, err := backend.Open(ctx, cfg.Backend)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Probe(ctx); err != nil {
		return err
	}
	cfg.Backend = b.Name()
	if n, err := b.DeviceCount(ctx); err != nil {
		return err
	} else if cfg.World > n && !cfg.ShareDevice {
		return fmt.Errorf("%w: --world %d but backend %s has %d devices", errUsage, cfg.World, b.Name(), n)
	}
	total := len(cfg.Colls) * len(cfg.Sizes) * len(cfg.Algos)
	progress := newProgress(s.Err, total)
	var samples []benchSample
	if *procs {
		samples, err = benchProcesses(ctx, cfg, progress, s.Err)
	} else {
		samples, err = benchGoroutines(ctx, cfg, b, progress)
	}
	progress.done()
	if err != nil {
		return err
	}
	var rendezvousUS, openUS float64
	kept := samples[:0]
	for _, smp := range samples {
		if smp.Algo == rendezvousSample {
			rendezvousUS = max(rendezvousUS, smp.TimeUS)
			continue
		}
		if smp.Algo == deviceOpenSample {
			openUS = max(openUS, smp.TimeUS)
			continue
		}
		kept = append(kept, smp)
	}
	samples = kept
	rows := aggregate(cfg, samples)
	if strings.HasPrefix(cfg.Backend, "fake") {
		cfg.anchor = memcpyAnchor(cfg.Sizes)
	}
	if *plot != "" {
		if err := savePlots(*plot, cfg, rows); err != nil {
			return err
		}
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	case *asCSV:
		if err := writeCSV(s.Out, rows); err != nil {
			return err
		}
	default:
		if err := writeTable(s.Out, cfg, *procs, openUS, rendezvousUS, rows); err != nil {
			return err
		}
	}
	wrong := 0
	for _, r := range rows {
		wrong += r.Wrong
	}
	if wrong > 0 {
		return fmt.Errorf("%d wrong elements", wrong)
	}
	return nil
}

func benchSetup(backendName string, world int, minB, maxB string, factor int, dtypeS, opS, algoS string, iters, warmup int, buffer string) (benchConfig, error) {
	var cfg benchConfig
	lo, err := parseBytes(minB)
	if err != nil {
		return cfg, err
	}
	hi, err := parseBytes(maxB)
	if err != nil {
		return cfg, err
	}
	buf, err := parseBytes(buffer)
	if err != nil {
		return cfg, err
	}
	switch {
	case lo < 1 || hi < lo:
		return cfg, fmt.Errorf("%w: need 1 <= -b <= -e, got %d and %d", errUsage, lo, hi)
	case factor < 2:
		return cfg, fmt.Errorf("%w: -f must be at least 2", errUsage)
	case world < 2 || world > collective.MaxDevices:
		return cfg, fmt.Errorf("%w: --world must be 2 to %d", errUsage, collective.MaxDevices)
	case iters < 1 || warmup < 0:
		return cfg, fmt.Errorf("%w: --iters must be positive and --warmup not negative", errUsage)
	}
	d, err := backend.ParseDType(dtypeS)
	if err != nil {
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	op, err := backend.ParseReduceOp(opS)
	if err != nil {
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	var algos []string
	switch algoS {
	case "all":
		algos = []string{"oneshot", "twoshot", "hcm", "pipeline", "direct", "copy", "nccl"}
	case "auto":
		algos = []string{"auto"}
	default:
		for _, a := range strings.Split(algoS, ",") {
			if a == "nccl" || a == "auto" {
				algos = append(algos, a)
				continue
			}
			if _, err := collective.ParseAlgo(a); err != nil || a == "none" {
				return cfg, fmt.Errorf("%w: --algo %q", errUsage, a)
			}
			algos = append(algos, strings.ToLower(a))
		}
	}
	var sizes []int
	for n := lo; n <= hi; n *= factor {
		sizes = append(sizes, n)
	}
	return benchConfig{Backend: backendName, World: world, Sizes: sizes, DType: d, Op: op, Algos: algos, Replays: 1,
		Iters: iters, Warmup: warmup, BufferSize: buf}, nil
}

// parseColls reads --op: collective names, comma-separated, or "all".
func parseColls(s string) ([]collective.Op, error) {
	if s == "all" {
		return collective.Ops, nil
	}
	var out []collective.Op
	for _, name := range strings.Split(s, ",") {
		o, err := collective.ParseOp(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("%w: --op: %v", errUsage, err)
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out, nil
}

// parseBytes reads "4096", "1K", "8M", "1G" (powers of 1024).
func parseBytes(s string) (int, error) {
	mult := 1
	t := strings.ToUpper(strings.TrimSpace(s))
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	v, err := strconv.Atoi(t)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: %q is not a size", errUsage, s)
	}
	return v * mult, nil
}

func benchGoroutines(ctx context.Context, cfg benchConfig, b backend.Backend, p *progress) ([]benchSample, error) {
	if cfg.Store == "" {
		cfg.Store = "mem://" + cfg.Prefix
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// One process: the profile holds every rank.
	stop, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return nil, err
	}
	defer stop()
	var mu sync.Mutex
	var samples []benchSample
	errs := make([]error, cfg.World)
	var wg sync.WaitGroup
	for r := range cfg.World {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := openBenchStore(ctx, cfg)
			if err != nil {
				errs[r] = err
				cancel()
				return
			}
			defer st.Close()
			errs[r] = benchRank(ctx, cfg, r, st, b, func(smp benchSample) error {
				mu.Lock()
				defer mu.Unlock()
				samples = append(samples, smp)
				if r == 0 {
					p.step(smp)
				}
				return nil
			})
			if errs[r] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return samples, rankErrors(errs)
}

func rankErrors(errs []error) error {
	var out []error
	for r, err := range errs {
		if err != nil {
			out = append(out, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	return errors.Join(out...)
}

// benchProcesses runs each rank as a child process (internal/launch) and
// collects the samples it prints as JSON lines; any other line a rank
// prints (a device-side printf, a library's message) goes to other,
// prefixed with the rank. The first rank to fail ends the others.
func benchProcesses(ctx context.Context, cfg benchConfig, p *progress, other io.Writer) ([]benchSample, error) {
	serve := cfg.Store == ""
	var samples []benchSample
	res, err := launch.Run(ctx, launch.Config{
		World:        cfg.World,
		Args:         []string{benchRankCommand},
		ServeStore:   serve,
		StoreOptions: []store.Option{store.WithTimeout(cfg.Timeout)},
		Env: func(r int, addr string) []string {
			c := cfg
			if serve {
				c.Store = "tcp://" + addr
			}
			raw, _ := json.Marshal(c)
			env := []string{envBenchConfig + "=" + string(raw)}
			if cfg.Hosts > 1 {
				// NCCL tells the simulated hosts apart by NCCL_HOSTID.
				env = append(env, "NCCL_HOSTID="+conformance.SimulatedHost(r, cfg.World, cfg.Hosts))
			}
			return env
		},
		Deadline: cfg.Timeout + 10*time.Second,
		FailFast: true,
		Lines: func(r int, line []byte) {
			var smp benchSample
			if err := json.Unmarshal(line, &smp); err != nil {
				fmt.Fprintf(other, "rank %d: %s\n", r, line)
				return
			}
			samples = append(samples, smp)
			if r == 0 {
				p.step(smp)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(res))
	for _, x := range res {
		if x.Err != nil {
			errs[x.Rank] = fmt.Errorf("%w: %s", x.Err, strings.TrimSpace(x.Output))
		}
	}
	return samples, rankErrors(errs)
}

// labelled writes every line with label appended.
type labelled struct {
	w     io.Writer
	label string
}

func (l labelled) Write(p []byte) (int, error) {
	out := strings.ReplaceAll(string(p), "\n", l.label+"\n")
	if _, err := io.WriteString(l.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// memcpyAnchor times a plain copy of the sweep's largest size (at most 64
// MiB) in this process: the fake backend's kernels move their data through
// the same memory, so it is what their bus bandwidth compares with.
func memcpyAnchor(sizes []int) string {
	n := 0
	for _, sz := range sizes {
		n = max(n, sz)
	}
	n = min(max(n, 1<<10), 64<<20)
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // touch both
	reps := max(1, (256<<20)/n)
	start := time.Now()
	for range reps {
		copy(dst, src)
	}
	sec := time.Since(start).Seconds()
	return fmt.Sprintf("memcpy of %d bytes in one process, %.2f GB/s (%d copies)", n, float64(n)*float64(reps)/sec/1e9, reps)
}

func aggregate(cfg benchConfig, samples []benchSample) []benchRow {
	type key struct {
		coll    string
		bytes   int
		algo    string
		inPlace bool
	}
	rows := map[key]*benchRow{}
	var order []key
	for _, smp := range samples {
		k := key{smp.Coll, smp.Bytes, smp.Algo, smp.InPlace}
		r, ok := rows[k]
		if !ok {
			r = &benchRow{Coll: smp.Coll, Bytes: smp.Bytes, Count: smp.Bytes / cfg.DType.Size(), Type: cfg.DType.String(),
				Op: cfg.Op.String(), Algo: smp.Algo, InPlace: smp.InPlace}
			if o, _ := collective.ParseOp(smp.Coll); o != collective.OpAllReduce && o != collective.OpReduceScatter {
				r.Op = "none"
			}
			rows[k] = r
			order = append(order, k)
		}
		r.TimeUS = max(r.TimeUS, smp.TimeUS)
		r.Wrong += smp.Wrong
		if smp.Skipped != "" {
			r.Skipped = smp.Skipped
		}
	}
	collIndex := func(name string) int {
		o, _ := collective.ParseOp(name)
		return slices.Index(cfg.Colls, o)
	}
	sort.SliceStable(order, func(a, b int) bool {
		if ca, cb := collIndex(order[a].coll), collIndex(order[b].coll); ca != cb {
			return ca < cb
		}
		return order[a].bytes < order[b].bytes
	})
	// An algorithm that could run at no size for a collective (HCM off a
	// hybrid cube mesh, an all-reduce algorithm for all-gather) gets no
	// rows there at all.
	type collAlgo struct{ coll, algo string }
	ran := map[collAlgo]bool{}
	for _, r := range rows {
		k := collAlgo{r.Coll, r.Algo}
		ran[k] = ran[k] || r.Skipped == ""
	}
	out := make([]benchRow, 0, len(order))
	for _, k := range order {
		r := rows[k]
		if !ran[collAlgo{r.Coll, r.Algo}] {
			continue
		}
		if r.Skipped == "" && r.TimeUS > 0 {
			o, _ := collective.ParseOp(r.Coll)
			r.AlgBW = float64(r.Bytes) / (r.TimeUS * 1e-6) / 1e9
			r.BusBW = r.AlgBW * o.BusFactor(cfg.World)
		}
		out = append(out, *r)
	}
	return out
}

func writeTable(w io.Writer, cfg benchConfig, procs bool, openUS, rendezvousUS float64, rows []benchRow) error {
	mode := "goroutines"
	if procs {
		mode = "processes"
	}
	graph := cfg.timing()
	if cfg.ShareDevice {
		mode += ", every rank on device 0"
		w = labelled{w, "  [shared device 0: correctness run, not a performance figure]"}
	}
	if cfg.Hosts > 1 {
		mode += fmt.Sprintf(", %d simulated hosts of %d ranks: hier = inside each host then across, flat = the inter-host engine across every rank; wall clock", cfg.Hosts, cfg.World/cfg.Hosts)
		if cfg.NoCallCheck {
			mode += "; no call check across hosts"
		}
	}
	spin := ""
	if cfg.Hosts <= 1 {
		spin = fmt.Sprintf(" (and up to %d untimed calls before the first row)", spinUpCalls)
	}
	fmt.Fprintf(w, "# intranode bench: backend %s, world %d (%s), %s, iters %d, warmup %d%s, median of %d replays, buffer %d bytes\n",
		cfg.Backend, cfg.World, mode, graph, cfg.Iters, cfg.Warmup, spin, cfg.Replays, cfg.BufferSize)
	fmt.Fprintf(w, "# first Rendezvous (topology, %d-byte symmetric buffer, exchange, mapping), every rank's device open first: %.1f ms, slowest rank\n",
		cfg.BufferSize, rendezvousUS/1e3)
	fmt.Fprintf(w, "# (before it, opening the device and so creating its driver context: %.1f ms, slowest rank)\n", openUS/1e3)
	if cfg.anchor != "" {
		fmt.Fprintf(w, "# anchor, same run: %s\n", cfg.anchor)
	}
	fmt.Fprintf(w, "# time is the slowest rank's mean per call; size and count are nccl-tests': the whole message (all-gather: the\n")
	fmt.Fprintf(w, "# output, reduce-scatter: the input, alltoall: what a rank sends); busbw = algbw * 2(n-1)/n (all_reduce),\n")
	fmt.Fprintf(w, "# (n-1)/n (reduce_scatter, all_gather, alltoall), 1 (broadcast); GB/s = 1e9 bytes/s\n")
	const head = "#%11s %12s %9s %6s %8s %6s %10s %8s %8s %7s\n"
	var sum float64
	n, wrong := 0, 0
	for i, r := range rows {
		if i == 0 || r.Coll != rows[i-1].Coll {
			fmt.Fprintf(w, "#\n# %s\n", r.Coll)
			fmt.Fprintf(w, head, "size", "count", "type", "redop", "algo", "place", "time", "algbw", "busbw", "#wrong")
			fmt.Fprintf(w, head, "(B)", "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "")
		}
		place := "out"
		if r.InPlace {
			place = "in"
		}
		if r.Skipped != "" {
			fmt.Fprintf(w, " %11d %12d %9s %6s %8s %6s %10s %8s %8s %7s\n", r.Bytes, r.Count, r.Type, r.Op, r.Algo, place,
				"n/a", "-", "-", "-")
			continue
		}
		fmt.Fprintf(w, " %11d %12d %9s %6s %8s %6s %10.2f %8.2f %8.2f %7d\n", r.Bytes, r.Count, r.Type, r.Op, r.Algo, place,
			r.TimeUS, r.AlgBW, r.BusBW, r.Wrong)
		sum += r.BusBW
		n++
		wrong += r.Wrong
	}
	ok := "OK"
	if wrong > 0 {
		ok = "FAILED"
	}
	avg := 0.0
	if n > 0 {
		avg = sum / float64(n)
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, ok)
	fmt.Fprintf(w, "# Avg bus bandwidth    : %.4f\n#\n", avg)
	return nil
}

func writeCSV(w io.Writer, rows []benchRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"collective", "size_bytes", "count", "type", "redop", "algo", "inplace", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "skipped"})
	for _, r := range rows {
		_ = cw.Write([]string{r.Coll, strconv.Itoa(r.Bytes), strconv.Itoa(r.Count), r.Type, r.Op, r.Algo, strconv.FormatBool(r.InPlace),
			strconv.FormatFloat(r.TimeUS, 'f', 3, 64), strconv.FormatFloat(r.AlgBW, 'f', 3, 64),
			strconv.FormatFloat(r.BusBW, 'f', 3, 64), strconv.Itoa(r.Wrong), r.Skipped})
	}
	cw.Flush()
	return cw.Error()
}

// progress prints how far a sweep has got on stderr.
type progress struct {
	w     io.Writer
	total int
	n     int
}

// newProgress returns a progress indicator that writes to w only when w is
// a terminal (so logs and pipes stay clean).
func newProgress(w io.Writer, total int) *progress {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return &progress{w: w, total: total}
		}
	}
	return &progress{total: total}
}

func (p *progress) step(smp benchSample) {
	if p.w == nil || smp.InPlace || smp.Algo == rendezvousSample || smp.Algo == deviceOpenSample {
		return
	}
	p.n++
	fmt.Fprintf(p.w, "\r[%d/%d] %d bytes %s      ", p.n, p.total, smp.Bytes, smp.Algo)
}

func (p *progress) done() {
	if p.w != nil && p.n > 0 {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// savePlots writes a chart per collective: to path itself for one, to
// path with the collective's name before the extension for several
// ("bench.svg" -> "bench-all_gather.svg").
func savePlots(path string, cfg benchConfig, rows []benchRow) error {
	for _, o := range cfg.Colls {
		var mine []benchRow
		for _, r := range rows {
			if r.Coll == o.String() {
				mine = append(mine, r)
			}
		}
		p := path
		if len(cfg.Colls) > 1 {
			ext := filepath.Ext(path)
			p = strings.TrimSuffix(path, ext) + "-" + o.String() + ext
		}
		if err := savePlot(p, o, cfg, mine); err != nil {
			return err
		}
	}
	return nil
}

func savePlot(path string, o collective.Op, cfg benchConfig, rows []benchRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("%v %v, %s backend, %d ranks, %s", o, cfg.DType, cfg.Backend, cfg.World, cfg.timing())
	if err := writePlot(f, title, rows); err != nil {
		_ = f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	return f.Close()
}
