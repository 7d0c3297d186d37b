//go:build rocm

package rocm

// The TestGPU… tests need an AMD GPU and ROCm, and skip, saying why, where
// Probe fails. Build them on a development machine and run them on the GPU
// host (docs/ROCM.md):
//
//	go test -c -tags rocm -o rocm.test ./backend/rocm && ./rocm.test -test.v

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/connectivity"
)

// openGPU opens the real backend, skipping the test when no GPU is usable.
func openGPU(t *testing.T) *Backend {
	t.Helper()
	return gputest.OpenBackend(t, Open, "AMD GPU")
}

func TestGPUAllocAndCopy(t *testing.T) { testAllocCopyAndHost(t, openGPU(t)) }

func TestGPUBuiltinModuleAndLaunch(t *testing.T) { testBuiltinModuleAndLaunch(t, openGPU(t)) }

func TestGPUStreamsEventsGraphs(t *testing.T) { testStreamsEventsGraphs(t, openGPU(t)) }

func TestGPUSynchronizeTimesOut(t *testing.T) { testSynchronizeTimesOut(t, openGPU(t)) }

func TestGPUCheckRange(t *testing.T) { gputest.CheckRange(t, openGPU(t)) }

// TestGPUTopology reads the link matrix and checks that every linked pair
// has working peer access; it logs what doctor would print.
func TestGPUTopology(t *testing.T) {
	ctx := context.Background()
	b := openGPU(t)
	for _, d := range b.Diagnostics(ctx) {
		t.Logf("%-22s ok=%-5v %s %s", d.Check, d.OK, d.Detail, d.Hint)
	}
	m, err := b.LinkMatrix(ctx)
	if err != nil {
		t.Skipf("no link matrix: %v", err)
	}
	var table strings.Builder
	require.NoError(t, connectivity.WriteTable(&table, m, connectivity.TableOptions{}))
	t.Logf("topology %v:\n%s", connectivity.Detect(m), table.String())
	for i := range m.Size() {
		for j := range m.Size() {
			if m.At(i, j) == 0 {
				continue
			}
			ok, err := b.PeerAccess(ctx, i, j)
			require.NoError(t, err)
			require.True(t, ok, "devices %d and %d are linked but have no peer access", i, j)
		}
	}
}

// TestGPUShareableSameProcess shares memory of device 0 with device 1 of
// the same process, in the backend's sharing mode.
func TestGPUShareableSameProcess(t *testing.T) {
	ctx := context.Background()
	b := openGPU(t)
	if len(b.devices) < 2 {
		t.Skip("needs two GPUs")
	}
	t.Logf("sharing: %s", b.share)
	d0, d1 := openDev(t, b, 0), openDev(t, b, 1)
	a, err := d0.AllocShareable(ctx, 3<<20, b.share.kind)
	require.NoError(t, err)
	closeLater(t, a)
	h, err := a.Export(b.share.kind)
	require.NoError(t, err)
	if h.File != nil {
		defer h.File.Close()
	}
	imp, err := d1.Import(ctx, h)
	require.NoError(t, err)
	closeLater(t, imp)
	want := pattern(a.Size(), 5)
	require.NoError(t, d0.CopyToDevice(ctx, a.Ptr(), want))
	got := make([]byte, a.Size())
	require.NoError(t, d1.CopyFromDevice(ctx, got, imp.Ptr()))
	require.Equal(t, want, got)
}

// Environment of TestGPUShareableChild: the handle (hex bytes, or "fd" for
// descriptor 3) and its size.
const (
	envShareChildHandle = "INTRANODE_ROCM_TEST_SHARE_HANDLE"
	envShareChildSize   = "INTRANODE_ROCM_TEST_SHARE_SIZE"
)

// TestGPUShareableChildProcess shares memory of device 0 with another
// process, which checks what this one wrote and writes back: the IPC handle
// path (hipIpcOpenMemHandle) or the descriptor path, whichever the backend
// uses here. One GPU is enough.
func TestGPUShareableChildProcess(t *testing.T) {
	ctx := context.Background()
	b := openGPU(t)
	d := openDev(t, b, 0)
	a, err := d.AllocShareable(ctx, 1<<20, b.share.kind)
	require.NoError(t, err)
	closeLater(t, a)
	require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), pattern(a.Size(), 1)))
	h, err := a.Export(b.share.kind)
	require.NoError(t, err)
	child := gputest.Child{Env: []string{envShareChildSize + "=" + strconv.Itoa(h.Size)}}
	if h.File != nil {
		defer h.File.Close()
		child.Files = []*os.File{h.File}
		child.Env = append(child.Env, envShareChildHandle+"=fd")
	} else {
		child.Env = append(child.Env, envShareChildHandle+"="+hex.EncodeToString(h.Opaque))
	}
	gputest.RunChildWith(t, child, "TestGPUShareableChild")
	got := make([]byte, a.Size())
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, pattern(a.Size(), 2), got, "what the child wrote")
}

func TestGPUShareableChild(t *testing.T) {
	spec := os.Getenv(envShareChildHandle)
	if spec == "" {
		t.Skip("runs only as TestGPUShareableChildProcess' child process")
	}
	ctx := context.Background()
	b := openGPU(t)
	d := openDev(t, b, 0)
	size, err := strconv.Atoi(os.Getenv(envShareChildSize))
	require.NoError(t, err)
	h := backend.Handle{Kind: backend.HandleFabric, Size: size}
	if spec == "fd" {
		h.Kind, h.File = backend.HandleFD, os.NewFile(3, "shared")
	} else {
		h.Opaque, err = hex.DecodeString(spec)
		require.NoError(t, err)
	}
	imp, err := d.Import(ctx, h)
	require.NoError(t, err, "importing a %s handle", h.Kind)
	defer func() { require.NoError(t, imp.Close()) }()
	got := make([]byte, size)
	require.NoError(t, d.CopyFromDevice(ctx, got, imp.Ptr()))
	if !bytes.Equal(pattern(size, 1), got) {
		t.Fatalf("the parent's bytes did not arrive (first: %x)", got[:16])
	}
	require.NoError(t, d.CopyToDevice(ctx, imp.Ptr(), pattern(size, 2)))
}
