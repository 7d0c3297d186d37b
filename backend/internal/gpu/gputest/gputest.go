// Package gputest holds the test helpers the CUDA and ROCm backends' tests
// share.
package gputest

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// OpenBackend opens a backend with open and closes it when the test ends;
// when Probe finds no usable device (backend.ErrUnavailable) it skips the
// test, naming what it lacked ("CUDA device", "AMD GPU").
func OpenBackend[B backend.Backend](t testing.TB, open func(context.Context) (B, error), what string) B {
	t.Helper()
	b, err := open(context.Background())
	require.NoError(t, err)
	if err := b.Probe(context.Background()); err != nil {
		_ = b.Close()
		require.ErrorIs(t, err, backend.ErrUnavailable)
		t.Skipf("no usable %s: %v", what, err)
	}
	CloseLater(t, b)
	return b
}

// OpenDevice opens device i of b and checks, when the test ends, that
// closing it reports nothing left open.
func OpenDevice(t testing.TB, b backend.Backend, i int) backend.Device {
	t.Helper()
	d, err := b.Open(context.Background(), i)
	return opened(t, d, err)
}

// CloseLater closes c when the test ends and checks that it closed
// cleanly.
func CloseLater(t testing.TB, c interface{ Close() error }) {
	t.Cleanup(func() { require.NoError(t, c.Close()) })
}

// Alloc allocates n bytes on d and closes them when the test ends.
func Alloc(t testing.TB, d backend.Device, n int) backend.Allocation {
	t.Helper()
	a, err := d.Alloc(context.Background(), n)
	return opened(t, a, err)
}

// BuiltinModule loads the built-in kernels (kernels.ModuleName) on d and
// closes them when the test ends.
func BuiltinModule(t testing.TB, d backend.Device) backend.Module {
	t.Helper()
	m, err := d.LoadModule(context.Background(), backend.ModuleSource{Name: kernels.ModuleName})
	return opened(t, m, err)
}

// opened checks that v opened without err and closes it when the test
// ends.
func opened[T interface{ Close() error }](t testing.TB, v T, err error) T {
	t.Helper()
	require.NoError(t, err)
	CloseLater(t, v)
	return v
}

// RunChild runs the test named test in a fresh copy of this test binary
// (a driver library is loaded once per process) with env added, and
// checks that it passed; it returns the child's output.
func RunChild(t testing.TB, test string, env ...string) string {
	t.Helper()
	return RunChildWith(t, Child{Env: env}, test)
}

// Child is what RunChildWith gives the child process beyond this one's
// environment.
type Child struct {
	// Unset names variables removed from the environment; Env is added
	// after.
	Unset []string
	Env   []string
	// Files are the child's descriptors 3, 4, ….
	Files []*os.File
	// MaySkip lets a test of the child skip: t then skips too.
	MaySkip bool
}

// RunChildWith runs tests in one fresh copy of this test binary, set up as
// c says, and checks that each passed; it returns the child's output.
func RunChildWith(t testing.TB, c Child, tests ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^("+strings.Join(tests, "|")+")$", "-test.v", "-test.count=1")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(c.Unset, name)
	})
	cmd.Env = append(cmd.Env, c.Env...)
	cmd.ExtraFiles = c.Files
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child output:\n%s", out)
	for _, test := range tests {
		if c.MaySkip && strings.Contains(string(out), "--- SKIP: "+test+" ") {
			t.Skipf("the child skipped %s:\n%s", test, out)
		}
		require.Contains(t, string(out), "--- PASS: "+test+" ", "child output:\n%s", out)
	}
	return string(out)
}

// CheckRange checks device 0's backend.RangeChecker: ranges inside plain,
// host-mapped and shareable allocations pass, and a range running past the
// end of a device allocation fails with backend.ErrInvalidArgument, for
// the device's own allocations and for one made through another handle of
// the device (which only the driver knows).
func CheckRange(t *testing.T, b backend.Backend) {
	t.Helper()
	ctx := context.Background()
	d := OpenDevice(t, b, 0)
	rc, ok := d.(backend.RangeChecker)
	require.True(t, ok, "the device is a backend.RangeChecker")
	other := Alloc(t, OpenDevice(t, b, 0), 8192)
	a := Alloc(t, d, 4096)
	h, err := d.AllocHost(ctx, 256)
	require.NoError(t, err)
	CloseLater(t, h)
	for _, c := range []struct {
		name string
		p    backend.DevicePtr
		n    int
		ok   bool
	}{
		{"whole allocation", a.Ptr(), 4096, true},
		{"inside", a.Ptr().Add(100), 3996, true},
		{"empty", a.Ptr().Add(4096), 0, true},
		{"one byte past the end", a.Ptr().Add(100), 3997, false},
		{"far past the end", a.Ptr(), 4 << 20, false},
		{"host-mapped", h.Ptr(), 256, true},
		{"another handle's allocation", other.Ptr().Add(8), 8184, true},
		{"past another handle's allocation", other.Ptr().Add(8), 8185, false},
	} {
		err := rc.CheckRange(c.p, c.n)
		if c.ok {
			require.NoError(t, err, c.name)
		} else {
			require.ErrorIs(t, err, backend.ErrInvalidArgument, c.name)
			require.ErrorContains(t, err, "past the end", c.name)
		}
	}
	// Shareable memory of the first kind the device makes.
	for _, kind := range []backend.HandleKind{backend.HandleFD, backend.HandleFabric} {
		s, err := d.AllocShareable(ctx, max(d.Granularity(), 4096), kind)
		if err != nil {
			continue
		}
		CloseLater(t, s)
		require.NoError(t, rc.CheckRange(s.Ptr(), s.Size()), "shareable (%v)", kind)
		require.ErrorIs(t, rc.CheckRange(s.Ptr().Add(1), s.Size()), backend.ErrInvalidArgument, "shareable (%v) past the end", kind)
		break
	}
}

// mockCCL is testdata/mockccl.c, a mock of the collective library.
//
//go:embed testdata/mockccl.c
var mockCCL []byte

// MockCCLSource returns the C source of a mock NCCL/RCCL (see its
// comment), which the backends' tests build with the C compiler as
// libnccl.so.2 or librccl.so.1. It is embedded, so that a test binary
// built here runs on a GPU host without the source tree.
func MockCCLSource(t testing.TB) []byte {
	t.Helper()
	return mockCCL
}

// BuildSharedLibrary compiles the C source src into the shared library
// dir/name with $CC (else gcc), or says why it could not: no C compiler is
// an error, a compile error fails t.
func BuildSharedLibrary(t testing.TB, src []byte, dir, name string, libs ...string) (string, error) {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("no C compiler (%s): %w", cc, err)
	}
	file := filepath.Join(dir, strings.TrimSuffix(name, filepath.Ext(name))+".c")
	require.NoError(t, os.WriteFile(file, src, 0o600))
	lib := filepath.Join(dir, name)
	args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", lib, file}, libs...)
	out, err := exec.Command(cc, args...).CombinedOutput()
	require.NoError(t, err, "building %s:\n%s", name, out)
	return lib, nil
}

// BuildMockCCL builds MockCCLSource as dir/name (libnccl.so.2,
// librccl.so.1).
func BuildMockCCL(t testing.TB, dir, name string) (string, error) {
	return BuildSharedLibrary(t, MockCCLSource(t), dir, name, "-lpthread", "-ldl")
}
