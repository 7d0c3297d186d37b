package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/intranode/intranode/conformance"
)

func runConformance(ctx context.Context, args []string, s streams) error {
	var c common
	fs := newFlags("conformance", s)
	c.register(fs)
	worlds := fs.String("world", "2", "group sizes to run, comma-separated (e.g. 2,4,8)")
	procs := fs.Bool("procs", true, "run ranks as separate processes (false: goroutines in this process)")
	share := fs.Bool("share-device", false, "every rank on device 0, as goroutines of this process: a correctness run of many ranks on one GPU, never a performance figure (implies --procs=false)")
	quick := fs.Bool("quick", false, "trim the size sweeps")
	hosts := fs.Int("hosts", 1, "split each world into this many simulated hosts for the hosts/ cases (collectives across hosts; 1: they skip)")
	asJSON := fs.Bool("json", false, "print results as JSON")
	filter := fs.String("run", "", "only cases whose name matches this regular expression")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on each case")
	faults := fs.Bool("faults", false, "also run the faults group: ranks killed and stalled at each phase, hostile store and IPC clients")
	trials := fs.Int("trials", 1, "with --faults: run each fault case this many times and print how many trials met the expectation")
	faultDeadline := fs.Duration("fault-deadline", conformance.DefaultFaultDeadline,
		"with --faults: the deadline of each operation in a fault case")
	parallel := fs.Int("parallel", 1, "with --faults: run this many trials of a fault case at once")
	startSkew := fs.Duration("start-skew", 0, "with --faults: start each trial's victim this long after the other ranks (a rank slow to start)")
	storeURL := storeFlag(fs, "for every case, a fresh TCP store this command serves on loopback with --procs,\n"+
		"a fresh in-process one without; with a URL, every case runs under a fresh key prefix of it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ws, err := intList(*worlds)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w < 1 {
			return fmt.Errorf("%w: world %d must be positive", errUsage, w)
		}
	}
	if *hosts < 1 {
		return fmt.Errorf("%w: --hosts %d must be at least 1", errUsage, *hosts)
	}
	if *trials < 1 {
		return fmt.Errorf("%w: --trials %d must be at least 1", errUsage, *trials)
	}
	if *faultDeadline <= 0 {
		return fmt.Errorf("%w: --fault-deadline %v must be positive", errUsage, *faultDeadline)
	}
	if *parallel < 1 {
		return fmt.Errorf("%w: --parallel %d must be at least 1", errUsage, *parallel)
	}
	if *startSkew < 0 {
		return fmt.Errorf("%w: --start-skew %v must not be negative", errUsage, *startSkew)
	}
	if *share {
		*procs = false
	}
	if err := checkStoreURL(*storeURL, *procs); err != nil {
		return err
	}
	cfg := conformance.Config{Backend: c.backend, Mode: conformance.Goroutines, Worlds: ws, Timeout: *timeout,
		Quick: *quick, Logger: c.logger(s), Faults: *faults, Trials: *trials, FaultDeadline: *faultDeadline, FaultParallel: *parallel,
		StartSkew: *startSkew, StoreURL: *storeURL, ShareDevice: *share, Hosts: *hosts}
	// A shared device is labelled on every line: those results say the
	// kernels are right, nothing about speed.
	label := ""
	if *share {
		label = "  [shared device 0: correctness run]"
	}
	if *procs {
		cfg.Mode = conformance.Processes
	}
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			return fmt.Errorf("%w: --run: %v", errUsage, err)
		}
		cfg.Filter = re.MatchString
	}
	counts := map[conformance.Status]int{}
	var summaries []string
	report := func(r conformance.Result) {
		counts[r.Status]++
		if r.Summary != "" {
			summaries = append(summaries, fmt.Sprintf("world %d  %s", r.World, r.Summary))
		}
		if *asJSON {
			return
		}
		line := fmt.Sprintf("%-4s  %-44s world %d  %8s%s", r.Status, r.Case, r.World, r.Duration.Round(time.Millisecond), label)
		if r.Reason != "" {
			line += "  " + firstLineOf(r.Reason)
		}
		fmt.Fprintln(s.Out, line)
		if r.Summary != "" {
			fmt.Fprintln(s.Out, "      "+r.Summary)
		}
		if r.Status == conformance.Fail {
			fmt.Fprintln(s.Out, indent(r.Reason))
		}
	}
	start := time.Now()
	results, err := conformance.Run(ctx, cfg, report)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		if len(summaries) > 0 {
			skew := ""
			if cfg.StartSkew > 0 {
				skew = fmt.Sprintf(", victim started %v after the others", cfg.StartSkew)
			}
			fmt.Fprintf(s.Out, "\n# fault trials (backend %s, mode %s, deadline %v, %d trial(s) each, %d at a time%s)\n",
				c.backend, cfg.Mode, cfg.FaultDeadline, cfg.Trials, cfg.FaultParallel, skew)
			for _, line := range summaries {
				fmt.Fprintln(s.Out, line)
			}
		}
		where := ""
		if cfg.StoreURL != "" {
			where = ", store " + redactedURL(cfg.StoreURL)
		}
		fmt.Fprintf(s.Out, "\n%d passed, %d failed, %d skipped (%d cases, mode %s%s, %s)%s\n",
			counts[conformance.Pass], counts[conformance.Fail], counts[conformance.Skipped], len(results), cfg.Mode,
			where, time.Since(start).Round(time.Millisecond), label)
	}
	if counts[conformance.Fail] > 0 {
		return fmt.Errorf("%d case(s) failed", counts[conformance.Fail])
	}
	return nil
}

func firstLineOf(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

func indent(s string) string {
	out := "      "
	for _, r := range s {
		out += string(r)
		if r == '\n' {
			out += "      "
		}
	}
	return out
}
