//go:build rocm

package rocm

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
)

// mockHIP is a CPU stand-in for libamdhip64.so (see the file's comment).
//
//go:embed testdata/mockhip/mockhip.c
var mockHIP []byte

// envMockChild carries, to the re-executed test binary, the path of the
// mock runtime it loads: the runtime library is loaded once per process.
const envMockChild = "INTRANODE_ROCM_TEST_MOCK_HIP"

// TestMockRuntime runs the backend's C side, which no GPU of this project
// runs (no AMD GPU is lent), over mockhip.c: the loader and its entry
// table, the shims shared with CUDA through the GPU core's one binding of
// them, the HIP-specific allocation, IPC and launch shims, and the naming
// of a failed call by its entry point.
func TestMockRuntime(t *testing.T) {
	dir := t.TempDir()
	lib, err := gputest.BuildSharedLibrary(t, mockHIP, dir, "libamdhip64-mock.so")
	if err != nil {
		t.Skipf("cannot build the mock runtime: %v", err)
	}
	t.Logf("child:\n%s", gputest.RunChild(t, "TestMockRuntimeChild", envMockChild+"="+lib))
}

func TestMockRuntimeChild(t *testing.T) {
	lib := os.Getenv(envMockChild)
	if lib == "" {
		t.Skip("runs only as TestMockRuntime's child process")
	}
	// One thread throughout, so that a shim that did not make its device
	// current would find the last call's device there (see other below).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rt, err := loadHIPFrom([]string{lib})
	require.NoError(t, err)
	require.Equal(t, filepath.Base(lib), filepath.Base(rt.Library()))
	require.NoError(t, rt.Init())
	v, drv, err := rt.Version()
	require.NoError(t, err)
	require.Equal(t, 60241133, v)
	require.Equal(t, 60241133, drv)

	// Device queries.
	n, err := rt.DeviceCount()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	name, err := rt.DeviceName(1)
	require.NoError(t, err)
	require.Equal(t, "Mock MI300X", name)
	bus, err := rt.DevicePCIBusID(1)
	require.NoError(t, err)
	require.Equal(t, "0000:22:00.0", bus)
	uuid, ok, err := rt.DeviceUUID(1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, byte(16), uuid[0])
	can, err := rt.CanAccessPeer(0, 1)
	require.NoError(t, err)
	require.True(t, can)
	require.NoError(t, rt.EnablePeerAccess(0, 1))
	require.NoError(t, rt.EnablePeerAccess(0, 1), "already enabled is success")
	require.True(t, rt.HasVMM())

	// Memory: new memory is zeroed (the mock fills it with 0xa5), copies
	// and memsets bind the device in the same C call (the mock refuses
	// calls on a thread without one).
	c := gpu.Ctx(0)
	const size = 1 << 12
	p, err := rt.Malloc(c, size)
	require.NoError(t, err)
	got := make([]byte, size)
	require.NoError(t, rt.CopyDtoH(c, got, p))
	require.Equal(t, make([]byte, size), got)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i % 251)
	}
	require.NoError(t, rt.CopyHtoD(c, p, data))
	q, err := rt.Malloc(c, size)
	require.NoError(t, err)
	require.NoError(t, rt.CopyDtoD(c, q, p, size))
	require.NoError(t, rt.Memset(c, q, 7, 3))
	require.NoError(t, rt.CopyDtoH(c, got, q))
	require.Equal(t, append([]byte{7, 7, 7}, data[3:]...), got)
	base, n2, err := rt.AddressRange(c, q+100)
	require.NoError(t, err)
	require.Equal(t, q, base)
	require.Equal(t, size, n2)

	host, dptr, err := rt.HostMalloc(c, 64)
	require.NoError(t, err)
	require.Equal(t, make([]byte, 64), unsafe.Slice((*byte)(host), 64))
	require.NotZero(t, dptr)
	require.NoError(t, rt.HostFree(c, host))

	// Shareable memory and its IPC handle.
	sh, err := rt.MallocShareable(1, size, memUncached)
	require.NoError(t, err)
	h, err := rt.IPCGetHandle(1, sh)
	require.NoError(t, err)
	opened, err := rt.IPCOpenHandle(0, h)
	require.NoError(t, err)
	require.Equal(t, sh, opened)
	require.NoError(t, rt.IPCCloseHandle(0, opened))

	// Virtual memory management: memory made on device 0, exported as a
	// descriptor and imported on device 1 shows the same bytes.
	gran, err := rt.VMMGranularity(0, memUncached)
	require.NoError(t, err)
	require.Equal(t, 2<<20, gran)
	m0, err := rt.VMMCreate(0, gran, memUncached, []int{0, 1})
	require.NoError(t, err)
	require.NoError(t, rt.CopyDtoH(c, got, m0.ptr))
	require.Equal(t, make([]byte, size), got, "new memory is zeroed")
	require.NoError(t, rt.CopyHtoD(c, m0.ptr, data))
	fd, err := rt.VMMExportFD(0, m0)
	require.NoError(t, err)
	m1, err := rt.VMMImportFD(1, fd, gran, []int{1})
	require.NoError(t, err)
	require.NoError(t, unix.Close(fd))
	require.NotEqual(t, m0.ptr, m1.ptr)
	require.NoError(t, rt.CopyDtoH(gpu.Ctx(1), got, m1.ptr))
	require.Equal(t, data, got)
	require.NoError(t, rt.VMMRelease(1, m1))
	require.NoError(t, rt.VMMRelease(0, m0))
	_, err = rt.VMMCreate(0, gran, memUncached, nil)
	requireHIP(t, err, "hipMemSetAccess", hipErrorInvalidValue, backend.CodeInvalidArgument)

	// A failed call names its entry point, the binding's included.
	_, err = rt.Malloc(c, 2<<30)
	requireHIP(t, err, "hipMalloc", hipErrorOutOfMemory, backend.CodeOutOfMemory)
	_, err = rt.MallocShareable(0, 2<<30, memUncached)
	requireHIP(t, err, "hipExtMallocWithFlags", hipErrorOutOfMemory, backend.CodeOutOfMemory)
	_, err = rt.Malloc(gpu.Ctx(5), size)
	requireHIP(t, err, "hipSetDevice", hipErrorInvalidDevice, backend.CodeInvalidArgument)
	_, _, err = rt.AddressRange(c, 8)
	requireHIP(t, err, "hipMemGetAddressRange", hipErrorNotFound, backend.CodeNotFound)

	// Streams, events, a module, a launch and a captured graph, all on
	// device 0; other makes device 1 current on the thread before each
	// call, so a shim that did not bind device 0 fails (the mock refuses
	// work on another device's stream).
	other := func() { require.NoError(t, rt.Memset(gpu.Ctx(1), sh, 0, 1)) }
	other()
	s, err := rt.StreamCreate(c)
	require.NoError(t, err)
	start, err := rt.EventCreate(c, true)
	require.NoError(t, err)
	end, err := rt.EventCreate(c, false)
	require.NoError(t, err)
	done, err := rt.EventQuery(c, start)
	require.NoError(t, err)
	require.False(t, done, "an event never recorded is not done")
	other()
	require.NoError(t, rt.EventRecord(c, start, s))
	done, err = rt.EventQuery(c, start)
	require.NoError(t, err)
	require.True(t, done)
	_, err = rt.ModuleLoad(c, []byte("not a code object"))
	requireHIP(t, err, "hipModuleLoadData", hipErrorInvalidImage, backend.CodeInvalidArgument)
	m, err := rt.ModuleLoad(c, []byte("MOCKHIP image"))
	require.NoError(t, err)
	_, err = rt.ModuleFunction(c, m, "no_such_kernel")
	requireHIP(t, err, "hipModuleGetFunction", hipErrorNotFound, backend.CodeNotFound)
	f, err := rt.ModuleFunction(c, m, "fill_u32")
	require.NoError(t, err)

	fill := func(v uint32, count int) []byte {
		params := make([]byte, 24)
		binary.LittleEndian.PutUint64(params, uint64(p))
		binary.LittleEndian.PutUint32(params[8:], v)
		binary.LittleEndian.PutUint64(params[16:], uint64(count))
		return params
	}
	cfg := backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(256)}
	other()
	require.NoError(t, rt.Launch(c, f, cfg, s, fill(41, 8)))
	other()
	require.NoError(t, rt.StreamSynchronize(c, s))
	require.NoError(t, rt.CopyDtoH(c, got[:32], p))
	require.Equal(t, uint32(41), binary.LittleEndian.Uint32(got[28:]))
	require.NoError(t, rt.CopyDtoH(c, got[:4], p+32))
	require.Equal(t, data[32:36], got[:4], "the launch wrote past its count")
	err = rt.Launch(c, f, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(4096)}, s, fill(0, 1))
	requireHIP(t, err, "hipModuleLaunchKernel", hipErrorInvalidValue, backend.CodeInvalidArgument)

	other()
	require.NoError(t, rt.BeginCapture(c, s))
	other()
	require.NoError(t, rt.Launch(c, f, cfg, s, fill(9, 4)))
	other()
	require.NoError(t, rt.CopyDtoDAsync(c, q, p, 16, s))
	other()
	g, exec, err := rt.EndCapture(c, s)
	require.NoError(t, err)
	require.NoError(t, rt.CopyDtoH(c, got[:4], p))
	require.Equal(t, uint32(41), binary.LittleEndian.Uint32(got), "captured work does not run")
	other()
	require.NoError(t, rt.GraphLaunch(c, exec, s))
	other()
	require.NoError(t, rt.EventRecord(c, end, s))
	other()
	require.NoError(t, rt.StreamWaitEvent(c, s, end))
	require.NoError(t, rt.EventSynchronize(c, end))
	ms, err := rt.EventElapsed(c, start, start)
	require.NoError(t, err)
	require.Equal(t, float32(0.5), ms)
	_, err = rt.EventElapsed(c, start, end)
	requireHIP(t, err, "hipEventElapsedTime", hipErrorInvalidHandle, backend.CodeInvalidArgument)
	require.NoError(t, rt.CopyDtoH(c, got[:16], q))
	for i := range 4 {
		require.Equal(t, uint32(9), binary.LittleEndian.Uint32(got[4*i:]), "word %d after the replay", i)
	}
	_, err = rt.StreamQuery(gpu.Ctx(1), s)
	requireHIP(t, err, "hipStreamQuery", hipErrorInvalidHandle, backend.CodeInvalidArgument)

	require.NoError(t, rt.GraphDestroy(c, g, exec))
	require.NoError(t, rt.ModuleUnload(c, m))
	require.NoError(t, rt.EventDestroy(c, start))
	require.NoError(t, rt.EventDestroy(c, end))
	require.NoError(t, rt.StreamDestroy(c, s))
	require.NoError(t, rt.Free(c, p))
	require.NoError(t, rt.Free(c, q))
	requireHIP(t, rt.Free(c, q), "hipFree", hipErrorInvalidValue, backend.CodeInvalidArgument)
}

// requireHIP checks that err is the runtime's result r of entry point op,
// classified as code.
func requireHIP(t *testing.T, err error, op string, r int, code backend.Code) {
	t.Helper()
	var he *HIPError
	require.True(t, errors.As(err, &he), "%v is not a *HIPError", err)
	require.Equal(t, op, he.Op)
	require.Equal(t, r, he.Result)
	require.Equal(t, code, he.Code())
}
