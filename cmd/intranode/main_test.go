package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/internal/race"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/connectivity"
)

func TestMain(m *testing.M) {
	// Bench, soak and conformance re-execute this binary as their ranks.
	if len(os.Args) > 1 && (os.Args[1] == benchRankCommand || os.Args[1] == soakRankCommand) {
		os.Exit(run(context.Background(), os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	conformance.MaybeChild()
	launch.QuietRaceExit()
	race.ShareCores()
	os.Exit(m.Run())
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return out.String(), errOut.String(), code
}

func TestTopoEveryPreset(t *testing.T) {
	for _, tc := range []struct {
		preset string
		topo   connectivity.Topology
	}{
		{"full", connectivity.FullyConnected},
		{"hcm", connectivity.HybridCubeMesh},
		{"ring", connectivity.Unknown},
		{"pairs", connectivity.Unknown},
		{"none", connectivity.Unknown},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			t.Setenv("INTRANODE_FAKE_TOPOLOGY", tc.preset)
			out, stderr, code := runCLI(t, "topo", "--backend", "fake")
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, "Topology of all devices: "+tc.topo.String())
			require.Contains(t, out, "GPU7")
			require.Contains(t, out, "Peer access")

			out, stderr, code = runCLI(t, "topo", "--backend", "fake", "--json")
			require.Equal(t, 0, code, stderr)
			var rep struct {
				Backend  string              `json:"backend"`
				Topology string              `json:"topology"`
				Matrix   connectivity.Matrix `json:"matrix"`
				Devices  []map[string]any    `json:"devices"`
				Peer     [][]string          `json:"peer_access"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			require.Equal(t, "fake", rep.Backend)
			require.Equal(t, tc.topo.String(), rep.Topology)
			require.Len(t, rep.Devices, 8)
			require.NoError(t, rep.Matrix.Validate())
			require.Equal(t, tc.topo, connectivity.Detect(rep.Matrix))
			require.Equal(t, "yes", rep.Peer[0][0])
		})
	}
}

func TestBenchInProcess(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "bench", "--backend", "fake", "--procs=false", "-b", "8", "-e", "64K", "-f", "8",
		"--iters", "3", "--warmup", "1", "--dtype", "float", "--inplace")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "#wrong")
	require.Contains(t, out, "# Out of bounds values : 0 OK")
	require.Contains(t, out, "# Avg bus bandwidth")
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		require.Len(t, f, 10, line)
		require.Equal(t, "0", f[9], "wrong elements in %q", line)
		rows++
	}
	// 8, 64, 512, 4096, 32768 bytes × oneshot, twoshot, pipeline × out, in place.
	require.Equal(t, 5*3*2, rows)
}

func TestBenchProcessesJSON(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "bench", "--backend", "fake", "-b", "1K", "-e", "4K", "--iters", "2", "--warmup", "1",
		"--algo", "auto", "--json")
	require.Equal(t, 0, code, stderr)
	var rows []benchRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Zero(t, r.Wrong)
		require.Positive(t, r.TimeUS)
		require.Equal(t, "auto", r.Algo)
	}
}

func TestBenchGraphCSV(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "bench", "--backend", "fake", "--procs=false", "-b", "4K", "-e", "4K", "--iters", "4",
		"--graph", "--csv", "--algo", "oneshot,twoshot")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	require.True(t, strings.HasPrefix(lines[0], "collective,size_bytes,count,type"))
	require.True(t, strings.HasPrefix(lines[1], "all_reduce,4096,"), lines[1])
}

// TestBenchEveryCollective runs each collective's kernels through the
// bench, ranks as processes, and checks nccl-tests' sizes and bus
// bandwidth factors in the JSON.
func TestBenchEveryCollective(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "bench", "--backend", "fake", "--world", "4", "-b", "4K", "-e", "4K", "--iters", "2",
		"--warmup", "1", "--op", "all", "--algo", "direct,auto,nccl", "--json", "--inplace")
	require.Equal(t, 0, code, stderr)
	var rows []benchRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	factor := map[string]float64{"all_reduce": 1.5, "reduce_scatter": 0.75, "all_gather": 0.75, "broadcast": 1, "alltoall": 0.75}
	seen := map[string]int{}
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		seen[r.Coll]++
		require.Zero(t, r.Wrong, "%+v", r)
		require.Equal(t, 4096, r.Bytes, "%+v", r)
		require.InDelta(t, factor[r.Coll], r.BusBW/r.AlgBW, 1e-9, "%+v", r)
	}
	// all_reduce: auto in and out of place; the others: direct and auto,
	// in and out of place (the fake has no vendor library: nccl skipped).
	require.Equal(t, map[string]int{"all_reduce": 2, "reduce_scatter": 4, "all_gather": 4, "broadcast": 4, "alltoall": 4}, seen)
}

// TestConformanceHosts runs the collectives across simulated hosts in
// rank processes: 2 hosts of 2 and of 4 ranks, 4 hosts of 2.
func TestConformanceHosts(t *testing.T) {
	t.Parallel()
	// 2 × 1: hosts of one rank each, every call the inter-host engine's.
	for _, hw := range [][2]string{{"2", "2,4,8"}, {"4", "8"}} {
		out, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--quick", "--hosts", hw[0], "--world", hw[1],
			"--run", "^hosts/")
		require.Equal(t, 0, code, stderr+out)
		require.Contains(t, out, "pass  hosts/all_reduce")
		require.Contains(t, out, " 0 failed, 0 skipped")
	}
	_, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--hosts", "0")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--hosts 0")
}

// TestBenchHosts: the collectives across 2 simulated hosts, every path,
// each checked before it is timed; bad combinations are usage errors.
func TestBenchHosts(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "bench", "--backend", "fake", "--procs=false", "--hosts", "2", "--world", "4",
		"--op", "all_reduce,reduce_scatter,all_gather", "-b", "1K", "-e", "4K", "--iters", "2", "--warmup", "1", "--replays", "1")
	require.Equal(t, 0, code, stderr+out)
	for _, want := range []string{"# reduce_scatter", "hier", "flat", "auto"} {
		require.Contains(t, out, want)
	}
	for _, args := range [][]string{
		{"--hosts", "3", "--world", "4"},
		{"--hosts", "2", "--world", "4", "--graph"},
		{"--hosts", "2", "--world", "4", "--op", "broadcast"},
		{"--hosts", "2", "--world", "4", "--algo", "oneshot"},
	} {
		_, stderr, code := runCLI(t, append([]string{"bench", "--backend", "fake"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

func TestConformanceCommand(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--procs=false", "--quick",
		"--run", "^(rendezvous|symmetric)/", "--world", "2")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "pass  rendezvous/success")
	require.Contains(t, out, " 0 failed")

	out, _, code = runCLI(t, "conformance", "--backend", "fake", "--procs=false", "--quick", "--run", "^connectivity/", "--json")
	require.Equal(t, 0, code)
	var res []conformance.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res, 2)
	for _, r := range res {
		require.Equal(t, conformance.Pass, r.Status, r.Reason)
	}
}

func TestDoctorFake(t *testing.T) {
	out, stderr, code := runCLI(t, "doctor", "--backend", "fake")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "ipc socket")
	require.NotContains(t, out, "PROBLEM")
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"bench", "--world", "9"},
		{"bench", "-b", "1K", "-e", "10"},
		{"bench", "--dtype", "complex"},
		{"bench", "--algo", "magic"},
		{"topo", "extra"},
		{"conformance", "--run", "("},
	} {
		_, stderr, code := runCLI(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.NotEmpty(t, stderr)
	}
	_, stderr, code := runCLI(t, "topo", "--backend", "warp-drive")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not registered")
}

func TestVersion(t *testing.T) {
	out, _, code := runCLI(t, "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "intranode ")
	require.Contains(t, out, "fake")
}

func TestBenchStoreURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		url   string
		procs string
	}{{"file://" + dir, "true"}, {"mem://bench-test", "false"}} {
		out, stderr, code := runCLI(t, "bench", "--backend", "fake", "--procs="+tc.procs, "-b", "1K", "-e", "1K",
			"--iters", "2", "--warmup", "1", "--algo", "oneshot", "--store", tc.url)
		require.Equal(t, 0, code, "%s: %s", tc.url, stderr)
		require.Contains(t, out, "# Out of bounds values : 0 OK")
	}
	_, _, code := runCLI(t, "bench", "--backend", "fake", "--store", "tcp://127.0.0.1:1?serve=1")
	require.Equal(t, 2, code)
	_, stderr, code := runCLI(t, "bench", "--backend", "fake", "--store", "mem://bench-test")
	require.Equal(t, 2, code, "a mem:// store cannot reach rank processes")
	require.Contains(t, stderr, "one process")
	_, stderr, code = runCLI(t, "bench", "--backend", "fake", "-e", "1K", "--store", "gopher://x")
	require.Equal(t, 1, code)
	require.NotEmpty(t, stderr)
}

// TestBenchCPUProfile: --cpuprofile leaves a pprof profile (gzip-compressed
// protobuf) from rank 0, in both modes.
func TestBenchCPUProfile(t *testing.T) {
	t.Parallel()
	for _, procs := range []string{"--procs=false", "--procs=true"} {
		path := filepath.Join(t.TempDir(), "cpu.prof")
		_, stderr, code := runCLI(t, "bench", "--backend", "fake", procs, "-b", "1K", "-e", "1K",
			"--iters", "2", "--warmup", "1", "--algo", "oneshot", "--cpuprofile", path)
		require.Equal(t, 0, code, stderr)
		b, err := os.ReadFile(path)
		require.NoError(t, err, procs)
		require.Greater(t, len(b), 2, procs)
		require.Equal(t, []byte{0x1f, 0x8b}, b[:2], "%s: not a gzip-compressed profile", procs)
	}
}

func TestBenchSharedDevice(t *testing.T) {
	t.Parallel()
	out, stderr, code := runCLI(t, "bench", "--backend", "fake:devices=1", "--share-device", "--world", "2", "-b", "1K", "-e", "4K",
		"--iters", "2", "--warmup", "1")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Greater(t, len(lines), 5)
	for _, line := range lines {
		require.True(t, strings.HasSuffix(line, "[shared device 0: correctness run, not a performance figure]"), "unlabelled line %q", line)
	}
	require.Contains(t, out, "# Out of bounds values : 0 OK")

	_, stderr, code = runCLI(t, "bench", "--backend", "fake", "--share-device", "--json")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--share-device prints only the table")
}

// TestSoakWithChaos runs a short soak of 2 rank processes with a rank
// killed or stopped in each job: every survivor must fail within the call
// timeout plus a second, no result may be wrong, and nothing may leak.
func TestSoakWithChaos(t *testing.T) {
	out, stderr, code := runCLI(t, "soak", "--backend", "fake", "--world", "2", "--duration", "4s", "--chaos", "kill,stop",
		"--job", "1500ms", "--timeout", "1s", "--max", "64K", "--seed", "7")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "# OK: no wrong result, no hang, no leak")
	require.Regexp(t, `[1-9][0-9]* faults injected`, out)
}

// TestSoakSharingOneDevice soaks rank processes that share a host's only
// device, a rank killed in each job: the survivors' leak check then
// judges intranode's own resources alone.
func TestSoakSharingOneDevice(t *testing.T) {
	args := []string{"soak", "--backend", "fake:devices=1", "--world", "2", "--duration", "3s", "--chaos", "kill",
		"--job", "1s", "--timeout", "1s", "--max", "16K", "--seed", "11"}
	out, stderr, code := runCLI(t, append(args, "--share-device")...)
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "every rank on device 0")
	require.Regexp(t, `[1-9][0-9]* faults injected`, out)
	require.Contains(t, out, "# OK: no wrong result, no hang, no leak")

	out, stderr, code = runCLI(t, append(args, "--jobs", "1")...)
	require.NotEqual(t, 0, code, "rank 1 has no device of its own without --share-device: %s", out)
	require.Contains(t, stderr+out, "device 1")
}
