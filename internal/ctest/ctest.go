// Package ctest builds what the tests of intranode's C libraries run: a
// Go package as a C shared library, and C programs and libraries with gcc.
// It skips the test where there is no C compiler or cgo is off.
package ctest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tools returns the paths of gcc and go, skipping t without a C compiler
// or with cgo off.
func Tools(t testing.TB) (gcc, goTool string) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: the C libraries cannot be built")
	}
	goTool, err = exec.LookPath("go")
	require.NoError(t, err)
	if out, err := exec.Command(goTool, "env", "CGO_ENABLED").Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Skip("cgo is off: the C libraries cannot be built")
	}
	return gcc, goTool
}

// Run runs a build command and fails t with its output if it fails.
func Run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}

// SharedLibrary builds the main package pkg with -buildmode=c-shared into
// the file out.
func SharedLibrary(t testing.TB, goTool, out, pkg string) {
	t.Helper()
	Run(t, goTool, "build", "-buildmode=c-shared", "-o", out, pkg)
}
