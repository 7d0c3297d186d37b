//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
)

// envLoaderChild makes the test binary, re-executed, run the loader checks
// in a fresh process (the driver library is loaded once per process).
const envLoaderChild = "INTRANODE_CUDA_TEST_LOADER_CHILD"

func TestLoaderFailures(t *testing.T) {
	gputest.RunChild(t, "TestLoaderFailuresChild", envLoaderChild+"=1")
}

func TestLoaderFailuresChild(t *testing.T) {
	if os.Getenv(envLoaderChild) == "" {
		t.Skip("runs only as TestLoaderFailures' child process")
	}
	err := loadDriverFrom("libcuda-intranode-missing.so.1")
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, "libcuda-intranode-missing.so.1 not found: ")

	// A library without the driver's entry points: the C library (glibc's
	// name; elsewhere this part has nothing to open).
	err = loadDriverFrom("libc.so.6")
	require.ErrorIs(t, err, backend.ErrUnavailable)
	if !strings.Contains(err.Error(), "libc.so.6 not found") {
		require.ErrorContains(t, err, "libc.so.6 is too old")
		require.ErrorContains(t, err, "entry point cuInit missing")
	}

	// Failed loads leave nothing behind: the real library still loads (or
	// fails for its own reason) afterwards.
	err = loadDriver()
	if err != nil {
		require.ErrorIs(t, err, backend.ErrUnavailable)
	}
}

func TestOpenWithoutDevice(t *testing.T) {
	b, err := Open(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	perr := b.Probe(t.Context())
	if perr == nil {
		t.Skip("a CUDA device is present; the GPU tests cover this machine")
	}
	require.ErrorIs(t, perr, backend.ErrUnavailable)
	t.Logf("Probe: %v", perr)

	// Every method gives the same reason.
	_, err = b.DeviceCount(t.Context())
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.DeviceInfo(t.Context(), 0)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.LinkMatrix(t.Context())
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.PeerAccess(t.Context(), 0, 1)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.FabricSupported(t.Context(), 0)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.MulticastSupported(t.Context(), 0)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.Open(t.Context(), 0)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	_, err = b.DriverVersion(t.Context())
	require.ErrorIs(t, err, backend.ErrUnavailable)
	diags := b.Diagnostics(t.Context())
	require.Len(t, diags, 1)
	require.False(t, diags[0].OK)
	require.Equal(t, perr.Error(), diags[0].Detail)
	require.Equal(t, "cuda", b.Name())
	require.True(t, b.Capabilities().Has(backend.CapMultiProcess|backend.CapHandleFD|backend.CapGraphs))
	require.False(t, b.Capabilities().Has(backend.CapOverlapDevices))

	// Closing twice is fine; a closed backend says so.
	require.NoError(t, b.Close())
	_, err = b.DeviceCount(t.Context())
	require.ErrorIs(t, err, backend.ErrClosed)
}

func TestRegistered(t *testing.T) {
	require.Contains(t, backend.Drivers(), "cuda")
	require.Equal(t, "cuda", backend.Drivers()[0], "real hardware backends come first")
	_, err := backend.Open(t.Context(), "cuda:extra")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestDriverErrors(t *testing.T) {
	for _, c := range []struct {
		result int
		want   error
	}{
		{2, backend.ErrOutOfMemory},
		{1, backend.ErrInvalidArgument},
		{400, backend.ErrInvalidArgument},
		{100, backend.ErrUnavailable},
		{35, backend.ErrUnavailable},
		{500, backend.ErrNotFound},
		{702, backend.ErrTimeout},
		{801, backend.ErrNotSupported},
		{901, backend.ErrInvalidArgument},
		{700, backend.ErrInternal},
		{999, backend.ErrInternal},
	} {
		de := &DriverError{gpu.CallError{Op: "cuTest", Result: c.result, Name: fmt.Sprintf("CUDA_ERROR_%d", c.result), Description: "described"}}
		err := gpu.Wrap(de, "cuda: device %d: doing a thing", 3)
		require.ErrorIs(t, err, c.want, "result %d", c.result)
		var got *DriverError
		require.True(t, errors.As(err, &got))
		require.Equal(t, c.result, got.Result)
		require.Equal(t, fmt.Sprintf("cuda: device 3: doing a thing: cuTest: CUDA_ERROR_%d (%d): described", c.result, c.result), err.Error())
	}
	require.NoError(t, gpu.Wrap(nil, "nothing"))

	// A code already attached wins over the driver result's.
	inner := backend.Wrap(backend.CodeUnavailable, &DriverError{gpu.CallError{Op: "cuInit", Result: 999, Name: "CUDA_ERROR_UNKNOWN"}}, "driver")
	require.ErrorIs(t, gpu.Wrap(inner, "outer"), backend.ErrUnavailable)
	// A plain error becomes internal.
	require.ErrorIs(t, gpu.Wrap(errors.New("boom"), "outer"), backend.ErrInternal)
	require.Equal(t, "cuX: CUresult(7) (7)", (&DriverError{gpu.CallError{Op: "cuX", Result: 7, Name: "CUresult(7)"}}).Error())
}

func TestFormatUUID(t *testing.T) {
	u := [16]byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xa, 0xb}
	require.Equal(t, "GPU-deadbeef-0001-0203-0405-060708090a0b", formatUUID(u))
}

func TestDriverVersionString(t *testing.T) {
	require.Equal(t, "12.8", DriverVersion{CUDA: 12080}.CUDAString())
	require.Equal(t, "CUDA 13.0, driver 580.159", DriverVersion{CUDA: 13000, Driver: "580.159"}.String())
	require.Equal(t, "CUDA 11.4", DriverVersion{CUDA: 11040}.String())
}
