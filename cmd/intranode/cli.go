package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	// Backends built into every binary; cuda and rocm are added by files
	// with those build tags. The plugin driver loads out-of-process
	// backends: --backend plugin:PATH.
	_ "github.com/intranode/intranode/backend/fake"
	_ "github.com/intranode/intranode/backend/plugin"
	_ "github.com/intranode/intranode/kernels/cpu"

	// etcd:// store URLs.
	_ "github.com/intranode/intranode/symmetric/store/etcdstore"
)

// streams are the command's standard streams, injectable for tests.
type streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, s streams) error
	hidden  bool
}

func commands() []command {
	return []command{
		{name: "topo", summary: "show devices, link matrix, topology, peer access, fabric and multicast support", run: runTopo},
		{name: "bench", summary: "measure all-reduce latency and bandwidth (nccl-tests style table)", run: runBench},
		{name: "conformance", summary: "run the backend conformance suite", run: runConformance},
		{name: "soak", summary: "run random collectives for a while, checking every result, with faults injected (--chaos)", run: runSoak},
		{name: "doctor", summary: "check drivers, libraries, peer access and IPC, with hints", run: runDoctor},
		{name: "version", summary: "print the version", run: runVersion},
		{name: benchRankCommand, hidden: true, run: runBenchRank},
		{name: soakRankCommand, hidden: true, run: runSoakRank},
	}
}

// errUsage marks errors that should print usage; exit code 2.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, s streams) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(s.Out)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], s)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(s.Err, "intranode %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(s.Err, "intranode %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(s.Err, "intranode: unknown command %q\n", args[0])
	usage(s.Err)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: intranode <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'intranode <command> -h' for a command's flags.")
}

// common are the flags every command shares.
type common struct {
	backend string
	verbose bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.backend, "backend", "auto", "backend: auto, fake, cuda, rocm or plugin:PATH")
	fs.BoolVar(&c.verbose, "v", false, "log debug output to stderr")
}

func (c *common) logger(s streams) *slog.Logger {
	if !c.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(s.Err, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, s streams) *flag.FlagSet {
	fs := flag.NewFlagSet("intranode "+name, flag.ContinueOnError)
	fs.SetOutput(s.Err)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %s", errUsage, strings.Join(fs.Args(), " "))
	}
	return nil
}

// intList parses "2,4,8".
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var v int
		if _, err := fmt.Sscanf(f, "%d", &v); err != nil {
			return nil, fmt.Errorf("%w: %q is not a number", errUsage, f)
		}
		out = append(out, v)
	}
	sort.Ints(out)
	return out, nil
}
