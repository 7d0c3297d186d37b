package ncclapi_test

import (
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
// the mock on the fake backend, ranks as threads: every accelerated
// collective checked element by element and proven not to reach NCCL,
// int8, avg and send/receive proven to reach it, groups of one and of two
// collectives, splits, bad arguments, a stalled peer reported through
// ncclCommGetAsyncError, abort; and with INTRANODE_NCCL=off, every call
// reaching NCCL.
func TestNCCLLibrary(t *testing.T) {
	gcc, goTool := ctest.Tools(t)
	dir := t.TempDir()
	ctest.SharedLibrary(t, goTool, filepath.Join(dir, "libintranode-nccl.so"), "github.com/intranode/intranode/cmd/libintranode-nccl")
	mock := filepath.Join(dir, "mock", "libnccl.so.2")
	require.NoError(t, os.MkdirAll(filepath.Dir(mock), 0o700))
	ctest.Run(t, gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", mock, "testdata/mocknccl.c", "-lpthread")
	ctest.Run(t, gcc, "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", filepath.Join(dir, "check"), "testdata/check.c",
		"-L", dir, "-lintranode-nccl", "-Wl,-rpath,"+dir, "-ldl")

	for _, tc := range []struct {
		mode, world string
		env         []string
	}{
		{"accel", "2", nil},
		{"accel", "3", nil},
		{"accel", "4", []string{"INTRANODE_NCCL_DEBUG=INFO"}},
		{"off", "2", []string{"INTRANODE_NCCL=off"}},
		{"off", "4", []string{"INTRANODE_NCCL=off"}},
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
			} else {
				require.Empty(t, stderr.String(), "the library is quiet by default")
			}
		})
	}
}
