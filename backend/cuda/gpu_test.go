//go:build cuda

package cuda

// The TestGPU… tests (here, gpu_memory_test.go and gpu_launch_test.go) need
// a GPU and its driver, and skip, saying why, where Probe fails. Build them
// on a development machine and run them on the GPU host:
//
//	go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
//	.gpu/cuda.test -test.v -test.run GPU

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
)

// testPTX holds add_one, fill_u32 and spin_until (testdata/testkernels.cu).
//
//go:embed testdata/testkernels.ptx
var testPTX []byte

// openGPU opens the backend, skipping the test when no GPU is usable.
func openGPU(t testing.TB) *Backend {
	t.Helper()
	return gputest.OpenBackend(t, Open, "CUDA device")
}

// openDevice and closeLater are gputest's.
func openDevice(t testing.TB, b *Backend, i int) backend.Device { return gputest.OpenDevice(t, b, i) }

func closeLater(t testing.TB, c interface{ Close() error }) { gputest.CloseLater(t, c) }

func timeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func u32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func loadTestModule(t testing.TB, d backend.Device) backend.Module {
	t.Helper()
	m, err := d.LoadModule(context.Background(), backend.ModuleSource{Name: "testkernels", Image: testPTX})
	require.NoError(t, err)
	closeLater(t, m)
	return m
}

func kernelFn(t testing.TB, m backend.Module, name string) backend.Function {
	t.Helper()
	f, err := m.Function(name)
	require.NoError(t, err)
	require.Equal(t, name, f.Name())
	return f
}

func newStream(t testing.TB, d backend.Device) backend.Stream {
	t.Helper()
	s, err := d.NewStream(context.Background())
	require.NoError(t, err)
	closeLater(t, s)
	return s
}
func TestGPUEnumerate(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	require.Positive(t, n)
	v, err := b.DriverVersion(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, v.CUDA, 11040)
	t.Logf("driver: %s", v)
	if nv, err := b.NVMLVersion(ctx); err == nil {
		t.Logf("NVML %s", nv)
	}
	seen := map[string]bool{}
	for i := range n {
		info, err := b.DeviceInfo(ctx, i)
		require.NoError(t, err)
		require.Equal(t, i, info.Index)
		require.NotEmpty(t, info.Name)
		require.Regexp(t, `^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, info.UUID)
		require.Regexp(t, `^sm_\d+$`, info.Architecture)
		require.Positive(t, info.MemoryBytes)
		norm, err := NormalizeBusID(info.PCIBusID)
		require.NoError(t, err)
		require.Equal(t, norm, info.PCIBusID)
		require.False(t, seen[info.PCIBusID])
		seen[info.PCIBusID] = true
		t.Logf("device %d: %+v", i, info)
	}
	_, err = b.DeviceInfo(ctx, n)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)

	devs, err := b.NVMLDevices(ctx)
	if errors.Is(err, backend.ErrUnavailable) {
		t.Skipf("NVML unavailable: %v", err)
	}
	require.NoError(t, err)
	mapped := 0
	for _, d := range devs {
		if d.CUDAIndex < 0 {
			continue
		}
		mapped++
		info, err := b.DeviceInfo(ctx, d.CUDAIndex)
		require.NoError(t, err)
		require.Equal(t, info.PCIBusID, d.PCIBusID)
		require.Equal(t, info.UUID, d.UUID, "NVML and CUDA agree on the UUID of %s", d.PCIBusID)
	}
	require.Equal(t, n, mapped)

	m, err := b.LinkMatrix(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	require.Equal(t, n, m.Size())
	for i := range n {
		for j := range n {
			require.Equal(t, m.At(i, j), m.At(j, i), "links %d↔%d", i, j)
		}
	}
	t.Logf("link matrix: %v", m.Links)
}
func TestGPUPeerAccessMatrix(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	links, err := b.LinkMatrix(ctx)
	require.NoError(t, err)
	for i := range n {
		for j := range n {
			ok, err := b.PeerAccess(ctx, i, j)
			require.NoError(t, err)
			detail, err := b.PeerTest(ctx, i, j)
			require.NoError(t, err)
			t.Logf("peer %d→%d: %v %+v", i, j, ok, detail)
			if i == j {
				require.True(t, ok)
				continue
			}
			require.Equal(t, ok, detail.Verified)
			if links.At(i, j) > 0 {
				require.True(t, ok, "NVLinked devices %d→%d must have peer access: %s", i, j, detail.Reason)
			}
			again, err := b.PeerAccess(ctx, i, j)
			require.NoError(t, err)
			require.Equal(t, ok, again)
		}
	}
	pm, err := b.PeerAccessMatrix(ctx)
	require.NoError(t, err)
	require.Len(t, pm, n)
	_, err = b.PeerAccess(ctx, 0, n)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestGPUFabricAndMulticast(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	for i := range n {
		ok, err := b.FabricSupported(ctx, i)
		require.NoError(t, err)
		again, err := b.FabricSupported(ctx, i)
		require.NoError(t, err)
		require.Equal(t, ok, again)
		st, reason, err := b.FabricState(ctx, i)
		if !errors.Is(err, backend.ErrUnavailable) {
			require.NoError(t, err)
			require.NotEmpty(t, st.State)
		}
		mc, err := b.MulticastSupported(ctx, i)
		require.NoError(t, err)
		t.Logf("device %d: fabric state %q, fabric handles %v (%s), multicast attribute %v", i, st, ok, reason, mc)

		d := openDevice(t, b, i)
		a, err := d.AllocShareable(ctx, 1, backend.HandleFabric)
		if !ok {
			require.ErrorIs(t, err, backend.ErrNotSupported)
			continue
		}
		require.NoError(t, err)
		want := pattern(a.Size(), 5)
		require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), want))
		h, err := a.Export(backend.HandleFabric)
		require.NoError(t, err)
		require.Len(t, h.Opaque, 64)
		imp, err := d.Import(ctx, h)
		require.NoError(t, err)
		got := make([]byte, a.Size())
		require.NoError(t, d.CopyFromDevice(ctx, got, imp.Ptr()))
		require.Equal(t, want, got)
		require.NoError(t, imp.Close())
		require.NoError(t, a.Close())
	}
}

func TestGPUDiagnostics(t *testing.T) {
	b := openGPU(t)
	diags := b.Diagnostics(timeout(t))
	require.NotEmpty(t, diags)
	for _, d := range diags {
		t.Logf("%-20s ok=%-5v %s", d.Check, d.OK, d.Detail)
		require.True(t, d.OK, "%s: %s", d.Check, d.Detail)
	}
}

func TestGPUDeviceCloseReportsLeftovers(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	_, err = d.Alloc(ctx, 4096)
	require.NoError(t, err)
	_, err = d.NewStream(ctx)
	require.NoError(t, err)
	err = d.Close()
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "1 stream(s), 1 allocation(s) still open")
	require.NoError(t, d.Close())
	_, err = d.Alloc(ctx, 1)
	require.ErrorIs(t, err, backend.ErrClosed)
}

// TestGPULinkMatrixConcurrent reads the link matrix from several goroutines
// at once while others open and close devices, as ranks that share one
// process and one backend do, and wants the same matrix every time.
func TestGPULinkMatrixConcurrent(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	want, err := b.LinkMatrix(ctx)
	if errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrNotSupported) {
		t.Skipf("no link matrix here: %v", err)
	}
	require.NoError(t, err)
	const readers, reads = 4, 50
	errs := make(chan error, readers+n)
	for range readers {
		go func() {
			for range reads {
				m, err := b.LinkMatrix(ctx)
				if err != nil {
					errs <- err
					return
				}
				if !reflect.DeepEqual(m, want) {
					errs <- fmt.Errorf("link matrix %v, want %v", m.Links, want.Links)
					return
				}
			}
			errs <- nil
		}()
	}
	for i := range n {
		go func() {
			for range 5 {
				d, err := b.Open(ctx, i)
				if err != nil {
					errs <- err
					return
				}
				if err := d.Close(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range readers + n {
		require.NoError(t, <-errs)
	}
}
