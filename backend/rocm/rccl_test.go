//go:build rocm

package rocm

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/symmetric/store"
)

// TestRCCL: the ROCm backend's RCCL binding (the shims shared with the CUDA
// backend's NCCL, under this backend's names), on the fake HIP runtime: a
// missing library is ErrUnavailable naming the variable that points to
// one, a library that is not RCCL says what it lacks, and the mock library
// (gputest.MockCCLSource, built here as librccl.so.1) loads, reports its version
// and unique ids, and its error strings reach RCCLError. The inter-host
// engine refuses bad configurations and, without a library, fails to form
// with ErrUnavailable; HostGroups across hosts then say so instead of
// hanging. Collectives on RCCL need a GPU: the shared Go code is exercised
// end to end by the CUDA backend's mock tests.
func TestRCCL(t *testing.T) {
	mock, err := gputest.BuildMockCCL(t, t.TempDir(), "librccl.so.1")
	if err != nil {
		t.Skipf("cannot build the mock RCCL: %v", err)
	}

	b := openFake(t, newFakeHIP(2), nil)
	const missing = "/nonexistent/intranode/librccl.so.1"
	t.Setenv(EnvRCCLLibrary, missing)
	_, err = b.RCCLVersion()
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, missing+" not found")
	require.ErrorContains(t, err, EnvRCCLLibrary)
	ctx := t.Context()
	_, err = b.NewInterHost(ctx, collective.InterHostConfig{Store: store.NewMem(), Name: "rail0", Rank: 0, World: 2})
	require.ErrorIs(t, err, backend.ErrUnavailable)

	// Across 2 simulated hosts of 1 rank each, every call goes flat to
	// the engine, which cannot form: every rank fails with
	// ErrUnavailable, none hangs.
	st := store.NewMem()
	defer st.Close()
	errs := make(chan error, 2)
	for r := range 2 {
		go func() {
			dev := r
			h, err := collective.JoinHosts(ctx, st, r, 2, collective.Options{Backend: b, Device: &dev,
				Hostname: conformance.SimulatedHost(r, 2, 2), Timeout: 10 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			d, err := h.Device(ctx)
			if err == nil {
				err = conformance.CheckHostCollective(ctx, h, d, collective.OpAllReduce, backend.Float32, 4, 1, false)
			}
			errs <- errors.Join(err, h.Close())
		}()
	}
	for range 2 {
		require.ErrorIs(t, <-errs, backend.ErrUnavailable)
	}

	t.Setenv(EnvRCCLLibrary, "libc.so.6")
	_, err = b.RCCLVersion()
	require.ErrorIs(t, err, backend.ErrUnavailable)
	if !strings.Contains(err.Error(), "libc.so.6 not found") {
		require.ErrorContains(t, err, "libc.so.6 is not a usable RCCL")
		require.ErrorContains(t, err, "entry point ncclGetVersion missing")
	}

	t.Setenv(EnvRCCLLibrary, mock)
	v, err := b.RCCLVersion()
	require.NoError(t, err)
	require.Equal(t, "2.28.9", v)
	require.Equal(t, "0", os.Getenv("NCCL_NVLS_ENABLE"))
	id, r := b.rccl.Shims().UniqueID()
	require.Zero(t, r)
	require.Len(t, id, 128)
	err = b.rccl.Check("ncclCommInitRank", 5)
	var re *RCCLError
	require.ErrorAs(t, err, &re)
	require.EqualError(t, err, "ncclCommInitRank: ncclInvalidUsage (5): invalid usage (mock) (mock last error)")
	require.ErrorIs(t, gpu.Wrap(err, "creating"), backend.ErrInvalidArgument)
	err = b.rccl.Check("ncclCommInitRank", gpu.CCLDriverFailed|101)
	var he *HIPError
	require.ErrorAs(t, err, &he)
	require.Equal(t, "hipSetDevice", he.Op)

	_, err = b.NewInterHost(ctx, collective.InterHostConfig{Store: st, Name: "x", Rank: 2, World: 2})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	e, err := b.NewInterHost(ctx, collective.InterHostConfig{Store: st, Name: "rail0", Rank: 0, World: 2})
	require.NoError(t, err)
	require.NoError(t, e.Err())
	require.NoError(t, e.Close())
}
