//go:build cuda

package cuda

import (
	"context"
	_ "embed"
	"os"
	"testing"

	"github.com/intranode/intranode/backend/internal/gpu/gputest"
)

// mockCUDA is a CPU stand-in for libcuda.so.1 (see the file's comment).
//
//go:embed testdata/mockcuda/mockcuda.c
var mockCUDA []byte

// envMockChild marks the process TestMockDriver starts.
const envMockChild = "INTRANODE_CUDA_TEST_MOCK_CHILD"

// mockTests are the GPU tests whose every step the mock driver can carry
// out. The link matrix, peer matrix and diagnostics need NVML, and the
// timeout test needs a kernel that really spins.
var mockTests = []string{
	"TestGPUAllocAndCopy",
	"TestGPUCheckRange",
	"TestGPUShareableSameProcess",
	"TestGPUShareableChildProcess",
	"TestGPUHostMappedKernel",
	"TestGPUModuleAndLaunch",
	"TestGPUBuiltinModule",
	"TestGPUStreamOrderingAndEvents",
	"TestGPUImportStream",
	"TestGPUGraphCaptureReplay",
	"TestGPUFabricAndMulticast",
	"TestGPUDeviceCloseReportsLeftovers",
}

// TestMockDriver runs the GPU tests against mockcuda.c, built here into a
// libcuda.so.1 that the re-executed test binary finds through
// LD_LIBRARY_PATH. It proves the driver binding (entry points, argument
// order, contexts made current in every call, parameter buffers, shareable
// memory passed to another process) on machines without a GPU.
func TestMockDriver(t *testing.T) {
	if os.Getenv(envMockChild) != "" {
		t.Skip("already running against the mock driver")
	}
	if b, err := Open(context.Background()); err == nil {
		probe := b.Probe(context.Background())
		_ = b.Close()
		if probe == nil {
			t.Skip("a real CUDA device is present: the GPU tests cover it, and the mock driver's bus ids would disagree with the real NVML")
		}
	}
	dir := t.TempDir()
	if _, err := gputest.BuildSharedLibrary(t, mockCUDA, dir, "libcuda.so.1"); err != nil {
		t.Skipf("cannot build the mock driver: %v", err)
	}

	gputest.RunChildWith(t, gputest.Child{Env: []string{envMockChild + "=1", "LD_LIBRARY_PATH=" + dir + ":" + os.Getenv("LD_LIBRARY_PATH")}},
		mockTests...)
}
