package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConformanceFaults(t *testing.T) {
	out, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--faults", "--trials", "2",
		"--fault-deadline", "300ms", "--world", "2", "--run", "^faults/(stall-barrier|kill-barrier|kill-after-handshake|bad-store-client)$")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "# fault trials (backend fake, mode processes, deadline 300ms, 2 trial(s) each, 1 at a time)")
	require.Contains(t, out, "world 2  killed rank during barrier: 2/2 trials ended in an error on every survivor within deadline+2s")
	require.Contains(t, out, "world 2  killed rank after the handshake, in the rendezvous: 2/2 trials ended in an error on every survivor")
	require.Contains(t, out, "world 2  stalled rank (never calls barrier): 2/2 trials ended in an error naming the stalled rank")
	require.Contains(t, out, "world 2  garbage and wrong secrets on the TCP store: 2/2 trials left the group undisturbed")
	require.Contains(t, out, "4 passed, 0 failed")

	out, stderr, code = runCLI(t, "conformance", "--backend", "fake", "--run", "^faults/")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "0 passed, 0 failed, 0 skipped (0 cases", "the faults group is opt-in")
}

func TestConformanceFaultsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"conformance", "--faults", "--trials", "0"},
		{"conformance", "--faults", "--fault-deadline", "0s"},
		{"conformance", "--faults", "--parallel", "0"},
		{"conformance", "--faults", "--start-skew", "-1s"},
	} {
		_, stderr, code := runCLI(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.NotEmpty(t, stderr)
	}
}

// TestConformanceFaultsHosts: the fault cases across simulated hosts, in
// rank processes that must each be told their host: a killed rank and
// hosts whose calls differ, with 2 hosts of 2 ranks and 2 hosts of one
// (where the call check alone stands between a mismatched or dead peer
// and a wrong result).
func TestConformanceFaultsHosts(t *testing.T) {
	for _, tc := range []struct{ world, trials string }{{"4", "3"}, {"2", "2"}} {
		out, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--faults", "--trials", tc.trials,
			"--hosts", "2", "--world", tc.world, "--run", "^faults/(kill|mismatch)-hosts$")
		require.Equal(t, 0, code, stderr+out)
		trials := fmt.Sprintf(": %s/%s trials", tc.trials, tc.trials)
		require.Contains(t, out, "world "+tc.world+"  killed rank during an all-reduce, reduce-scatter or all-gather across simulated hosts"+trials)
		require.Contains(t, out, "world "+tc.world+"  the last simulated host makes another call than the others (count, dtype, op or collective)"+trials)
		require.Contains(t, out, "2 passed, 0 failed")
	}
}
