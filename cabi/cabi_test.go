package cabi_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/ctest"
)

// buildLibrary builds libintranode.so and the C check program against
// include/intranode.h into a fresh directory, or skips without a C
// compiler.
func buildLibrary(t *testing.T) (dir string) {
	t.Helper()
	gcc, goTool := ctest.Tools(t)
	dir = t.TempDir()
	ctest.SharedLibrary(t, goTool, filepath.Join(dir, "libintranode.so"), "github.com/intranode/intranode/cmd/libintranode")
	ctest.Run(t, gcc, "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", "-I", "../include",
		"-o", filepath.Join(dir, "check"), "testdata/check.c", "-L", dir, "-lintranode", "-Wl,-rpath,"+dir, "-ldl")
	// The NCCL-API library's mock NCCL, for communicators made over NCCL's.
	ctest.Run(t, gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, "libmocknccl.so"),
		"../ncclapi/testdata/mocknccl.c", "-lpthread")
	return dir
}

// TestCLibrary runs the C check program (testdata/check.c): every
// collective checked element by element, bad arguments, a stalled peer,
// abort; ranks as threads of one process and as processes, and as threads
// whose communicators are made over a (mock) NCCL communicator.
func TestCLibrary(t *testing.T) {
	dir := buildLibrary(t)
	t.Run("exports", func(t *testing.T) {
		requireExportsMatchHeader(t, filepath.Join(dir, "libintranode.so"), "intranode")
	})
	for _, args := range [][]string{{"threads", "2"}, {"threads", "4"}, {"procs", "2"}, {"procs", "3"}, {"nccl", "2"}, {"nccl", "4"}} {
		t.Run(strings.Join(args, "-"), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, "check"), args...)
			cmd.Env = append(os.Environ(), "INTRANODE_FAKE_DEVICES=8", "INTRANODE_NCCL_LIBRARY="+filepath.Join(dir, "libmocknccl.so"))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Equal(t, "ok\n", string(out))
		})
	}
}

// requireExportsMatchHeader checks that the library exports exactly the
// functions with prefix that include/intranode.h declares.
func requireExportsMatchHeader(t *testing.T, lib, prefix string) {
	t.Helper()
	header, err := os.ReadFile("../include/intranode.h")
	require.NoError(t, err)
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^[a-zA-Z_][a-zA-Z_0-9 ]*[ *](`+prefix+`[A-Za-z]+)\(`).FindAllSubmatch(header, -1) {
		declared = append(declared, string(m[1]))
	}
	f, err := elf.Open(lib)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var exported []string
	for _, s := range syms {
		if strings.HasPrefix(s.Name, prefix) && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			exported = append(exported, s.Name)
		}
	}
	slices.Sort(declared)
	slices.Sort(exported)
	require.NotEmpty(t, declared)
	require.Equal(t, declared, exported, "include/intranode.h and the library's exports differ")
}
