package ncclapi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/ctest"
)

// TestNCCLLibrary builds libintranode-nccl.so, a mock NCCL
// (testdata/mocknccl.c) and a program written against NCCL's interface
// (testdata/check.c), and runs the program with the library in front of
// the mock on the fake backend, ranks as threads and as processes (the
// mock keeps its groups in shared memory): every accelerated
// collective checked element by element and proven not to reach NCCL,
// int8 and send/receive proven to reach it, groups of one and of two
// collectives, splits, bad arguments, a stalled peer reported through
// ncclCommGetAsyncError, abort; with INTRANODE_NCCL=off, every call
// reaching NCCL; and on nonblocking communicators, whose NCCL calls return
// ncclInProgress, the bootstrap polling its all-gathers done; and a
// bootstrap whose all-gather never completes failing every later call on
// its communicator (the call sequence is lost) instead of forwarding it,
// and an abort from another thread ending such a bootstrap at once.
func TestNCCLLibrary(t *testing.T) {
	dir, mock := build(t, "check")

	for _, tc := range []struct {
		mode, world string
		env         []string
	}{
		{"accel", "2", nil},
		{"accel", "3", nil},
		{"accel", "4", []string{"INTRANODE_NCCL_DEBUG=INFO"}},
		{"off", "2", []string{"INTRANODE_NCCL=off"}},
		{"off", "4", []string{"INTRANODE_NCCL=off"}},
		{"procs-accel", "2", nil},
		{"procs-accel", "4", nil},
		{"procs-off", "3", []string{"INTRANODE_NCCL=off"}},
		{"nonblocking", "2", []string{"MOCKNCCL_NONBLOCKING=1"}},
		{"nonblocking", "4", []string{"MOCKNCCL_NONBLOCKING=1"}},
		{"lost", "2", []string{"MOCKNCCL_NONBLOCKING=1", "MOCKNCCL_STUCK=1"}},
		{"lost", "3", []string{"MOCKNCCL_NONBLOCKING=1", "MOCKNCCL_STUCK=1"}},
		{"abort-boot", "2", []string{"MOCKNCCL_NONBLOCKING=1", "MOCKNCCL_STUCK=1", "INTRANODE_NCCL_TIMEOUT_MS=30000"}},
	} {
		t.Run(tc.mode+"-"+tc.world, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, "check"), tc.mode, tc.world)
			cmd.Env = append(os.Environ(), "INTRANODE_NCCL_LIBRARY="+mock, "INTRANODE_NCCL_BACKEND=fake",
				"INTRANODE_NCCL_TIMEOUT_MS=1000", "INTRANODE_FAKE_DEVICES=8")
			cmd.Env = append(cmd.Env, tc.env...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
			require.Equal(t, "ok\n", stdout.String())
			if slices.Contains(tc.env, "INTRANODE_NCCL_DEBUG=INFO") {
				// One line per communicator: four ranks, then the two halves of the split.
				require.Equal(t, 8, strings.Count(stderr.String(), "msg=accelerated"), stderr.String())
				// Each line says where its bootstrap's time went: the
				// store's rounds ran as all-gathers on the mock NCCL.
				require.Regexp(t, `msg=accelerated .* first_gather=\S+ gathers=[1-9][0-9]* gather=\S+ setup=`, stderr.String())
			} else {
				require.Empty(t, stderr.String(), "the library is quiet by default")
			}
		})
	}
}

// TestNCCLLibraryByPath: a program that opens NCCL by path and looks its
// functions up in the handle, as Python's ctypes does (vLLM's and SGLang's
// pynccl), runs its all-reduces on intranode when the path is the
// library's (testdata/bypath.c: a sum and an average on two ranks, none
// reaching NCCL); with NCCL's own path and the library in LD_PRELOAD,
// every call reaches NCCL: a preloaded library is not searched for a
// symbol looked up in a handle, so such programs name the library's path
// instead (docs/NCCL.md).
func TestNCCLLibraryByPath(t *testing.T) {
	dir, mock := build(t)
	gcc, _ := ctest.Tools(t)
	prog := filepath.Join(dir, "bypath")
	ctest.Run(t, gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", prog, "testdata/bypath.c", "-ldl")
	lib := filepath.Join(dir, "libintranode-nccl.so")
	for _, tc := range []struct{ name, open, preload, want string }{
		{"intranode by path", lib, "", "0"},
		{"intranode by path and preloaded", lib, lib, "0"},
		{"NCCL by path, intranode preloaded", mock, lib, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(prog, tc.open, "2", tc.want)
			cmd.Env = append(os.Environ(), "INTRANODE_NCCL_LIBRARY="+mock, "INTRANODE_NCCL_BACKEND=fake",
				"INTRANODE_NCCL_TIMEOUT_MS=1000", "INTRANODE_FAKE_DEVICES=8")
			if tc.preload != "" {
				cmd.Env = append(cmd.Env, "LD_PRELOAD="+tc.preload)
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Equal(t, "ok\n", string(out))
		})
	}
}

// build builds libintranode-nccl.so, the mock NCCL and the named programs
// of testdata into a fresh directory; it returns the directory and the
// mock's path.
func build(t testing.TB, programs ...string) (dir, mock string) {
	t.Helper()
	gcc, goTool := ctest.Tools(t)
	dir = t.TempDir()
	ctest.SharedLibrary(t, goTool, filepath.Join(dir, "libintranode-nccl.so"), "github.com/intranode/intranode/cmd/libintranode-nccl")
	mock = filepath.Join(dir, "mock", "libnccl.so.2")
	require.NoError(t, os.MkdirAll(filepath.Dir(mock), 0o700))
	ctest.Run(t, gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", mock, "testdata/mocknccl.c", "-lpthread")
	for _, p := range programs {
		ctest.Run(t, gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", filepath.Join(dir, p), "testdata/"+p+".c",
			"-L", dir, "-lintranode-nccl", "-Wl,-rpath,"+dir, "-ldl")
	}
	return dir, mock
}

// BenchmarkForwardingOverhead reports what the library adds, on the CPU,
// to calls it hands to NCCL (testdata/overhead.c: the same calls straight
// to the mock NCCL and through the library, 200,000 each, on a one-rank
// communicator): ns per call for an int8 all-reduce, a float all-reduce on
// a ruled-out communicator, a group of one, and ncclCommGetAsyncError.
// Run with go test -run '^$' -bench ForwardingOverhead ./ncclapi.
func BenchmarkForwardingOverhead(b *testing.B) {
	dir, mock := build(b, "overhead")
	for range b.N {
		cmd := exec.Command(filepath.Join(dir, "overhead"))
		cmd.Env = append(os.Environ(), "INTRANODE_NCCL_LIBRARY="+mock, "INTRANODE_NCCL_BACKEND=fake")
		out, err := cmd.Output()
		require.NoError(b, err)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var name string
			var direct, lib, added float64
			_, err := fmt.Sscanf(line, "%s %g %g %g", &name, &direct, &lib, &added)
			require.NoError(b, err, line)
			b.ReportMetric(added, name+"-added-ns")
			b.ReportMetric(direct, name+"-direct-ns")
		}
	}
}
