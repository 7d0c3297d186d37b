//go:build rocm

package rocm

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
)

// envLoaderChild makes the test binary, re-executed, run the loader checks
// in a fresh process: the runtime library is loaded once per process.
const envLoaderChild = "INTRANODE_ROCM_TEST_LOADER_CHILD"

func TestLoaderFailures(t *testing.T) {
	t.Logf("child:\n%s", gputest.RunChild(t, "TestLoaderFailuresChild", envLoaderChild+"=1"))
}

func TestLoaderFailuresChild(t *testing.T) {
	if os.Getenv(envLoaderChild) == "" {
		t.Skip("runs only as TestLoaderFailures' child process")
	}
	_, err := loadHIPFrom([]string{"libamdhip64-intranode-missing.so"})
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, "libamdhip64-intranode-missing.so not found: ")

	_, err = loadHIPFrom([]string{"libamdhip64-intranode-missing.so", "libamdhip64-intranode-missing.so.6"})
	require.ErrorContains(t, err, "(also tried libamdhip64-intranode-missing.so.6)")

	// A library without the runtime's entry points: the C library (glibc's
	// name; elsewhere this part has nothing to open).
	_, err = loadHIPFrom([]string{"libc.so.6"})
	require.ErrorIs(t, err, backend.ErrUnavailable)
	if !strings.Contains(err.Error(), "libc.so.6 not found") {
		require.ErrorContains(t, err, "libc.so.6 is too old (intranode needs HIP 5.2 or newer): entry point hipInit missing")
	}

	// The same for the SMI libraries.
	bogus := smiLibrary{which: smiLibraries[1].which, name: smiROCmSMI, file: "librocm_smi64-intranode-missing.so"}
	_, err = bogus.open()
	require.ErrorContains(t, err, "rocm-smi: librocm_smi64-intranode-missing.so not found: ")

	// Failed loads leave nothing behind: the real runtime still loads (or
	// fails for its own reason) afterwards, and says why in one line.
	b, err := Open(context.Background())
	require.NoError(t, err)
	defer b.Close()
	perr := b.Probe(context.Background())
	if perr == nil {
		t.Logf("an AMD GPU is present: %d device(s)", len(b.devices))
		return
	}
	require.ErrorIs(t, perr, backend.ErrUnavailable)
	require.NotContains(t, perr.Error(), "\n")
	if !strings.HasPrefix(perr.Error(), "rocm: no AMD GPU: ") {
		require.True(t, strings.HasPrefix(perr.Error(), "rocm: libamdhip64.so not found: "), perr.Error())
	}
	t.Logf("Probe: %v", perr)
}

// TestSMILibrary opens the system management library of this machine, if it
// has one, and reads what the link matrix would. Without GPUs it sees none.
func TestSMILibrary(t *testing.T) {
	s, err := openSMI()
	if err != nil {
		require.ErrorIs(t, err, backend.ErrUnavailable)
		t.Skipf("no SMI library: %v", err)
	}
	defer func() { require.NoError(t, s.Close()) }()
	n, err := s.DeviceCount()
	require.NoError(t, err)
	t.Logf("%s sees %d GPU(s)", s.Library(), n)
	for i := range n {
		id, err := s.BusID(i)
		require.NoError(t, err)
		_, err = NormalizeBusID(id)
		require.NoError(t, err)
	}
	if n == 0 {
		_, err := s.BusID(0)
		require.Error(t, err)
	}
}

func TestHIPLibraryCandidates(t *testing.T) {
	t.Setenv(EnvHIPLibrary, "")
	t.Setenv("ROCM_PATH", "/opt/rocm-6.2.0")
	require.Equal(t, []string{"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
		"/opt/rocm-6.2.0/lib/libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"}, hipLibraryCandidates())
	t.Setenv(EnvHIPLibrary, "/somewhere/libamdhip64.so.6")
	require.Equal(t, []string{"/somewhere/libamdhip64.so.6"}, hipLibraryCandidates())
	t.Setenv("ROCM_PATH", "")
	require.Equal(t, []string{"librocm_smi64.so", "librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
		"librocm_smi64.so.1", "/opt/rocm/lib/librocm_smi64.so"}, smiLibraries[1].candidates())
}

func TestOpenSMIChoice(t *testing.T) {
	t.Setenv(EnvSMI, "nvml")
	_, err := openSMI()
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, `INTRANODE_ROCM_SMI="nvml": want amdsmi or rocm-smi`)
}
