// Package launch runs the ranks of one job as child processes of the
// current binary: it serves the job's store, starts one child per rank,
// forwards or captures what each prints, collects how each ended, and
// kills the whole group at the deadline or, when asked, on the first
// failure. `intranode bench`, `intranode conformance` and the conformance
// suite's process mode all start their ranks through it.
package launch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intranode/intranode/symmetric/store"
)

// EnvRank names the variable that tells a child its rank.
const EnvRank = "INTRANODE_LAUNCH_RANK"

// Config describes one group of rank processes.
type Config struct {
	// World is the number of ranks.
	World int
	// Args are every child's command-line arguments (the executable is
	// the current binary).
	Args []string
	// Env returns the variables rank r gets on top of this process's
	// environment and EnvRank; storeAddr is the address of the served
	// store ("" without ServeStore).
	Env func(r int, storeAddr string) []string
	// ServeStore starts a TCP store on loopback for the group, with
	// StoreOptions, and closes it when the group has ended.
	ServeStore   bool
	StoreOptions []store.Option
	// Deadline bounds the whole group: children still running then are
	// sent SIGQUIT, so that a Go child writes every goroutine's stack to
	// its standard error (Result.Output) on the way out, and killed if
	// they have not ended 2 s later; they are reported as timed out.
	Deadline time.Duration
	// FailFast kills the other children as soon as one fails.
	FailFast bool
	// Lines, when set, receives each line a child writes to standard
	// output as it comes (standard error is still captured); otherwise
	// both are captured into Result.Output.
	Lines func(r int, line []byte)
}

// Result is how one rank's process ended.
type Result struct {
	Rank int
	// Err is the process's failure (exit status, signal, or a start
	// that failed); nil when it exited 0.
	Err error
	// Output is what the child printed (standard error only, when
	// Config.Lines takes standard output).
	Output string
	// Killed says the process ended by SIGKILL that the group did not
	// send (a fault, the kernel), TimedOut that the deadline ended it.
	Killed   bool
	TimedOut bool
	// Pid is the process's id; 0 when it did not start.
	Pid int
}

// Group is a started set of rank processes.
type Group struct {
	cmds    []*exec.Cmd
	results []Result
	ctx     context.Context
	cancel  context.CancelFunc
	stop    func()
	wg      sync.WaitGroup
}

// Start serves the store (if asked) and starts every rank. A rank that
// cannot be started is reported in its Result; the others run.
func Start(ctx context.Context, cfg Config) (*Group, error) {
	if cfg.World <= 0 {
		return nil, fmt.Errorf("launch: world %d", cfg.World)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	g := &Group{cmds: make([]*exec.Cmd, cfg.World), results: make([]Result, cfg.World), stop: func() {}}
	addr := ""
	if cfg.ServeStore {
		srv, err := store.ListenTCP("127.0.0.1:0", cfg.StoreOptions...)
		if err != nil {
			return nil, fmt.Errorf("launch: starting the store: %w", err)
		}
		addr, g.stop = srv.Addr(), func() { _ = srv.Close() }
	}
	if cfg.Deadline > 0 {
		g.ctx, g.cancel = context.WithTimeout(ctx, cfg.Deadline)
	} else {
		g.ctx, g.cancel = context.WithCancel(ctx)
	}
	var mu sync.Mutex // serialises Lines
	for r := range cfg.World {
		cmd := exec.CommandContext(g.ctx, exe, cfg.Args...)
		cmd.Env = append(ChildEnv(), EnvRank+"="+strconv.Itoa(r))
		if procs, ok := shareCores(cfg.World); ok {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
		}
		if cfg.Env != nil {
			cmd.Env = append(cmd.Env, cfg.Env(r, addr)...)
		}
		cmd.WaitDelay = 2 * time.Second
		cmd.Cancel = func() error {
			if errors.Is(g.ctx.Err(), context.DeadlineExceeded) {
				// A hang: where it hung is worth the 2 s.
				return cmd.Process.Signal(syscall.SIGQUIT)
			}
			return cmd.Process.Kill()
		}
		var out bytes.Buffer
		var stdout io.ReadCloser
		if cfg.Lines != nil {
			cmd.Stderr = &out
			if stdout, err = cmd.StdoutPipe(); err != nil {
				g.results[r] = Result{Rank: r, Err: err}
				continue
			}
		} else {
			cmd.Stdout, cmd.Stderr = &out, &out
		}
		g.results[r].Rank = r
		if err := cmd.Start(); err != nil {
			g.results[r].Err = fmt.Errorf("starting rank %d: %w", r, err)
			continue
		}
		g.cmds[r] = cmd
		g.results[r].Pid = cmd.Process.Pid
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if stdout != nil {
				sc := bufio.NewScanner(stdout)
				sc.Buffer(make([]byte, 64<<10), 16<<20)
				for sc.Scan() {
					mu.Lock()
					cfg.Lines(r, sc.Bytes())
					mu.Unlock()
				}
			}
			err := cmd.Wait()
			res := &g.results[r]
			res.Output, res.Err = out.String(), err
			res.TimedOut = err != nil && errors.Is(g.ctx.Err(), context.DeadlineExceeded)
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					res.Killed = g.ctx.Err() == nil
				}
			}
			if err != nil && cfg.FailFast {
				g.cancel()
			}
		}()
	}
	return g, nil
}

// Signal sends sig to rank r's process, if it runs.
func (g *Group) Signal(r int, sig os.Signal) error {
	if r < 0 || r >= len(g.cmds) || g.cmds[r] == nil {
		return fmt.Errorf("launch: no process for rank %d", r)
	}
	return g.cmds[r].Process.Signal(sig)
}

// Wait waits for every rank, stops the store and returns how each ended.
func (g *Group) Wait() []Result {
	g.wg.Wait()
	g.cancel()
	g.stop()
	return g.results
}

// Run is Start followed by Wait.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	g, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return g.Wait(), nil
}

// ChildEnv is this process's environment for a child of the same binary:
// where the binary was built with the race detector, the detector's
// one-second sleep at exit (GORACE atexit_sleep_ms, there so that racing
// goroutines can still report) is turned off unless GORACE sets it, so a
// job of short-lived ranks does not wait a second per rank.
func ChildEnv() []string {
	env := os.Environ()
	if g, ok := quietRace(); ok {
		env = append(env, "GORACE="+g)
	}
	return env
}

// QuietRaceExit sets GORACE in this process's environment as ChildEnv
// does, so that every child started afterwards, by any means, inherits it;
// test mains that start copies of their binary call it first. This process
// itself read GORACE when it started and is not affected.
func QuietRaceExit() {
	if g, ok := quietRace(); ok {
		_ = os.Setenv("GORACE", g)
	}
}

func quietRace() (string, bool) {
	g := os.Getenv("GORACE")
	if strings.Contains(g, "atexit_sleep_ms") {
		return "", false
	}
	return strings.TrimSpace(g + " atexit_sleep_ms=0"), true
}

// shareCores is the GOMAXPROCS each of world ranks gets: its share of
// this machine's cores, at least 1, so that the ranks' Go schedulers do
// not together run more threads than there are cores (on two cores, two
// ranks of the fake backend, each with a kernel spinning for its peer and
// a host goroutine, had calls stall for a scheduler slice of milliseconds
// at a time; torchrun sets OMP_NUM_THREADS=1 per rank for the same
// reason). ok is false when this process's environment sets GOMAXPROCS,
// which the children then inherit.
func shareCores(world int) (procs int, ok bool) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return 0, false
	}
	return max(1, runtime.NumCPU()/world), true
}

// Rank returns the rank EnvRank gives this process, and whether it is a
// launched rank at all.
func Rank() (int, bool) {
	v, ok := os.LookupEnv(EnvRank)
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(v)
	return r, err == nil
}

// HungStacks condenses the goroutine dump a Go rank process writes when
// the deadline's SIGQUIT ends it (Config.Deadline): the goroutines that
// run this module's code, each as its state and its frames, innermost
// first, without file lines.
func HungStacks(output string) string {
	const module = "github.com/intranode/intranode/"
	var out []string
	for _, block := range strings.Split(output, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "goroutine ") || !strings.Contains(block, module) {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "created by ") {
				continue
			}
			if i := strings.LastIndex(l, "("); i > 0 {
				l = l[:i]
			}
			frames = append(frames, strings.TrimPrefix(l, module))
			if len(frames) == 8 {
				break
			}
		}
		state := strings.TrimSuffix(strings.TrimPrefix(lines[0], "goroutine "), ":")
		out = append(out, state+": "+strings.Join(frames, " < "))
		if len(out) == 4 {
			break
		}
	}
	if len(out) == 0 {
		return "no stack of this module's code in its output"
	}
	return "stacks: " + strings.Join(out, " | ")
}
