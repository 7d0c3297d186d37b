//go:build linux

package plugin_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend/plugin"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/internal/race"
	_ "github.com/intranode/intranode/kernels/cpu"
)

// The test binary plays two extra parts: a conformance rank (MaybeChild)
// and a throwaway host that opens a plugin and then exits or waits to be
// killed (envHost), to prove that no plugin outlives its host.
const (
	envHost    = "INTRANODE_PLUGIN_TEST_HOST" // "exit" or "wait"
	envHostBin = "INTRANODE_PLUGIN_TEST_BIN"
)

// binDir holds the plugin binary built for this run.
var binDir string

func TestMain(m *testing.M) {
	conformance.MaybeChild()
	if mode := os.Getenv(envHost); mode != "" {
		os.Exit(hostMain(mode))
	}
	// Plugins and ranks exit often here: no race-build sleep at exit.
	launch.QuietRaceExit()
	race.ShareCores()
	dir, err := os.MkdirTemp("", "intranode-plugin-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// hostMain opens the plugin, prints its pid, waits until its standard
// input ends (the test has seen the plugin running), then exits without
// closing anything ("exit") or waits to be killed ("wait").
func hostMain(mode string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := plugin.Open(ctx, os.Getenv(envHostBin))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := b.DeviceCount(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pid %d\n", b.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if mode == "wait" {
		<-ctx.Done()
	}
	return 0
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// pluginBinary builds cmd/intranode-fake-plugin once per run, with the race
// detector when this test binary has it (so the build reuses its packages).
func pluginBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("building the plugin needs the go command: %w", err)
			return
		}
		out := filepath.Join(binDir, "intranode-fake-plugin")
		args := []string{"build", "-buildvcs=false", "-o", out}
		if race.Enabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/intranode/intranode/cmd/intranode-fake-plugin")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if msg, err := exec.CommandContext(ctx, goBin, args...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, msg)
			return
		}
		binPath = out
	})
	require.NoError(t, buildErr)
	return binPath
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	return ok && rest != "" && rest[0] != 'Z' && rest[0] != 'X'
}

// startHost runs the test binary as a throwaway host of the plugin at bin,
// checks that the plugin runs, lets the host go on (closes its standard
// input: in "exit" mode it then exits at once) and returns it with the
// plugin's pid.
func startHost(t *testing.T, ctx context.Context, bin, mode string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHost+"="+mode, envHostBin+"="+bin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the host printed no pid")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	require.NoError(t, err, "host said %q", line)
	require.True(t, alive(pid), "plugin %d is not running", pid)
	require.NoError(t, in.Close())
	return cmd, pid
}
