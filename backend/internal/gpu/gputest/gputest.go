// Package gputest holds the test helpers the CUDA and ROCm backends' tests
// share.
package gputest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

// OpenDevice opens device i of b and checks, when the test ends, that
// closing it reports nothing left open.
func OpenDevice(t testing.TB, b backend.Backend, i int) backend.Device {
	t.Helper()
	d, err := b.Open(context.Background(), i)
	require.NoError(t, err)
	CloseLater(t, d)
	return d
}

// CloseLater closes c when the test ends and checks that it closed
// cleanly.
func CloseLater(t testing.TB, c interface{ Close() error }) {
	t.Cleanup(func() { require.NoError(t, c.Close()) })
}

// RunChild runs the test named test in a fresh copy of this test binary
// (a driver library is loaded once per process) with env added, and
// checks that it passed; it returns the child's output.
func RunChild(t testing.TB, test string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child output:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+test)
	return string(out)
}
