//go:build rocm

package rocm

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend/internal/gpu"
)

// The shims' headers, embedded so that the check runs from any directory
// (a test binary built here and run on a GPU host).
var (
	//go:embed hip_shim.h
	hipShimHeader []byte
	//go:embed smi_shim.h
	smiShimHeader []byte
)

// headerRoots are where the ROCm headers may be installed: Debian's
// packages put them under /usr/include, ROCm under $ROCM_PATH/include.
func headerRoots() []string {
	roots := []string{"/usr/include", "/opt/rocm/include"}
	if r := os.Getenv("ROCM_PATH"); r != "" {
		roots = append([]string{filepath.Join(r, "include")}, roots...)
	}
	return roots
}

func findHeader(name string) string {
	for _, r := range headerRoots() {
		if _, err := os.Stat(filepath.Join(r, name)); err == nil {
			return r
		}
	}
	return ""
}

// TestABIAgainstHeaders checks the numbers the backend declares instead of
// including ROCm headers — the constants and structures of hip_shim.h, the
// attribute and result numbers of hip.go and errors.go, the SMI link types
// — against the installed headers, where there are any (Debian's
// libamdhip64-dev, which hipcc pulls in, and librocm-smi-dev). What a
// header version does not define (the ROCm 6 structures on ROCm 5) is not
// checked.
func TestABIAgainstHeaders(t *testing.T) {
	hip := findHeader("hip/hip_runtime_api.h")
	if hip == "" {
		t.Skip("no HIP headers (hip/hip_runtime_api.h) installed")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s): %v", cc, err)
	}
	var src strings.Builder
	src.WriteString(`#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hip_shim.h"
#include "smi_shim.h"
`)
	smi := findHeader("rocm_smi/rocm_smi.h")
	if smi != "" {
		src.WriteString("#include <rocm_smi/rocm_smi.h>\n")
	}
	src.WriteString(`static int bad;
#define CHECKN(name, mine, theirs) do { long long m_ = (long long)(mine), t_ = (long long)(theirs); \
	if (m_ != t_) { printf("%s is %lld, the header says %s is %lld\n", name, m_, #theirs, t_); bad = 1; } } while (0)
#define CHECK(mine, theirs) CHECKN(#mine, mine, theirs)
int main(void) {
	printf("HIP headers %d.%d\n", HIP_VERSION_MAJOR, HIP_VERSION_MINOR);
	CHECK(INH_SUCCESS, hipSuccess);
	CHECK(INH_ERROR_NOT_READY, hipErrorNotReady);
	CHECK(INH_ERROR_NOT_SUPPORTED, hipErrorNotSupported);
	CHECK(INH_IPC_HANDLE_SIZE, HIP_IPC_HANDLE_SIZE);
	CHECK(INH_IPC_HANDLE_SIZE, sizeof(hipIpcMemHandle_t));
	CHECK(16, sizeof(hipUUID));
	CHECK(INH_HOST_MALLOC_PORTABLE, hipHostMallocPortable);
	CHECK(INH_HOST_MALLOC_MAPPED, hipHostMallocMapped);
	CHECK(INH_STREAM_NON_BLOCKING, hipStreamNonBlocking);
	CHECK(INH_EVENT_DISABLE_TIMING, hipEventDisableTiming);
	CHECK(INH_CAPTURE_MODE_RELAXED, hipStreamCaptureModeRelaxed);
	CHECK(INH_DEVICE_MALLOC_FINEGRAINED, hipDeviceMallocFinegrained);
	CHECK(INH_MEM_ALLOCATION_TYPE_PINNED, hipMemAllocationTypePinned);
	CHECK(INH_MEM_HANDLE_POSIX_FD, hipMemHandleTypePosixFileDescriptor);
	CHECK(INH_MEM_LOCATION_DEVICE, hipMemLocationTypeDevice);
	CHECK(INH_MEM_ACCESS_READWRITE, hipMemAccessFlagsProtReadWrite);
	CHECK(INH_MEM_GRANULARITY_MINIMUM, hipMemAllocationGranularityMinimum);
	CHECK(INH_LAUNCH_PARAM_BUFFER_POINTER, (uintptr_t)HIP_LAUNCH_PARAM_BUFFER_POINTER);
	CHECK(INH_LAUNCH_PARAM_BUFFER_SIZE, (uintptr_t)HIP_LAUNCH_PARAM_BUFFER_SIZE);
	CHECK(INH_LAUNCH_PARAM_END, (uintptr_t)HIP_LAUNCH_PARAM_END);
`)
	// The Go-side numbers, named as in the Go source.
	for _, c := range []struct {
		name   string
		mine   int
		theirs string
	}{
		{"attrCanMapHostMemory", int(attrCanMapHostMemory), "hipDeviceAttributeCanMapHostMemory"},
		{"attrComputeMajor", int(attrComputeMajor), "hipDeviceAttributeComputeCapabilityMajor"},
		{"attrComputeMinor", int(attrComputeMinor), "hipDeviceAttributeComputeCapabilityMinor"},
		{"attrMultiprocessorCount", int(attrMultiprocessorCount), "hipDeviceAttributeMultiprocessorCount"},
		{"attrWarpSize", int(attrWarpSize), "hipDeviceAttributeWarpSize"},
		{"attrFineGrainSupport", int(attrFineGrainSupport), "hipDeviceAttributeFineGrainSupport"},
		{"attrClockInstructionRate", int(attrClockInstructionRate), "hipDeviceAttributeClockInstructionRate"},
		{"hipErrorInvalidValue", hipErrorInvalidValue, "hipErrorInvalidValue"},
		{"hipErrorOutOfMemory", hipErrorOutOfMemory, "hipErrorOutOfMemory"},
		{"hipErrorNotInitialized", hipErrorNotInitialized, "hipErrorNotInitialized"},
		{"hipErrorDeinitialized", hipErrorDeinitialized, "hipErrorDeinitialized"},
		{"hipErrorNoDevice", hipErrorNoDevice, "hipErrorNoDevice"},
		{"hipErrorInvalidDevice", hipErrorInvalidDevice, "hipErrorInvalidDevice"},
		{"hipErrorInvalidContext", hipErrorInvalidContext, "hipErrorInvalidContext"},
		{"hipErrorInvalidImage", hipErrorInvalidImage, "hipErrorInvalidImage"},
		{"hipErrorNoBinaryForGpu", hipErrorNoBinaryForGpu, "hipErrorNoBinaryForGpu"},
		{"hipErrorNotFound", hipErrorNotFound, "hipErrorNotFound"},
		{"hipErrorNotReady", hipErrorNotReady, "hipErrorNotReady"},
		{"hipErrorPeerAlreadyOn", hipErrorPeerAlreadyOn, "hipErrorPeerAccessAlreadyEnabled"},
		{"hipErrorPeerUnsupported", hipErrorPeerUnsupported, "hipErrorPeerAccessUnsupported"},
		{"hipErrorNotSupported", hipErrorNotSupported, "hipErrorNotSupported"},
		{"hipErrorInvalidDevicePtr", hipErrorInvalidDevicePtr, "hipErrorInvalidDevicePointer"},
		{"hipErrorInvalidHandle", hipErrorInvalidHandle, "hipErrorInvalidHandle"},
		{"hipErrorIllegalAddress", hipErrorIllegalAddress, "hipErrorIllegalAddress"},
		{"hipErrorLaunchOutOfRes", hipErrorLaunchOutOfRes, "hipErrorLaunchOutOfResources"},
		{"hipErrorLaunchTimeOut", hipErrorLaunchTimeOut, "hipErrorLaunchTimeOut"},
		{"hipErrorInsufficientDrv", hipErrorInsufficientDrv, "hipErrorInsufficientDriver"},
		{"hipErrorSharedObjectInit", hipErrorSharedObjectInit, "hipErrorSharedObjectInitFailed"},
		{"hipErrorInvalidConfigured", hipErrorInvalidConfigured, "hipErrorInvalidConfiguration"},
		{"hipErrorCaptureFirst", hipErrorCaptureFirst, "hipErrorStreamCaptureUnsupported"},
		{"hipErrorUnknown", hipErrorUnknown, "hipErrorUnknown"},
		{"ipcHandleSize", ipcHandleSize, "HIP_IPC_HANDLE_SIZE"},
	} {
		fmt.Fprintf(&src, "\tCHECKN(\"%s\", %d, %s);\n", c.name, c.mine, c.theirs)
	}
	fmt.Fprintf(&src, `#if HIP_VERSION_MAJOR >= 6
	CHECK(%d, hipDeviceAttributeVirtualMemoryManagementSupported);
	CHECK(%d, hipDeviceAttributeWallClockRate);
	CHECK(INH_IPC_LAZY_ENABLE_PEER_ACCESS, hipIpcMemLazyEnablePeerAccess);
	CHECK(INH_DEVICE_MALLOC_UNCACHED, hipDeviceMallocUncached);
	CHECK(sizeof(inh_mem_prop), sizeof(hipMemAllocationProp));
	CHECK(offsetof(inh_mem_prop, type), offsetof(hipMemAllocationProp, type));
	CHECK(offsetof(inh_mem_prop, requestedHandleType), offsetof(hipMemAllocationProp, requestedHandleType));
	CHECK(offsetof(inh_mem_prop, location), offsetof(hipMemAllocationProp, location));
	CHECK(offsetof(inh_mem_prop, win32HandleMetaData), offsetof(hipMemAllocationProp, win32HandleMetaData));
	CHECK(offsetof(inh_mem_prop, allocFlags), offsetof(hipMemAllocationProp, allocFlags));
	CHECK(sizeof(inh_mem_access), sizeof(hipMemAccessDesc));
	CHECK(offsetof(inh_mem_access, flags), offsetof(hipMemAccessDesc, flags));
#else
	CHECK(0, hipIpcMemLazyEnablePeerAccess); /* what ipcOpenFlags passes before ROCm 6 */
#endif
#if HIP_VERSION >= 70200000
	CHECK(INH_MEM_ALLOCATION_TYPE_UNCACHED, hipMemAllocationTypeUncached);
#endif
`, int(attrVirtualMemory), int(attrWallClockRateKHz))
	if smi != "" {
		fmt.Fprintf(&src, "\tCHECK(%d, RSMI_IOLINK_TYPE_XGMI);\n\tCHECK(%d, RSMI_IOLINK_TYPE_PCIEXPRESS);\n\tCHECK(%d, RSMI_IOLINK_TYPE_UNDEFINED);\n\tCHECK(%d, RSMI_STATUS_NOT_SUPPORTED);\n\tCHECK(INS_NOT_SUPPORTED, RSMI_STATUS_NOT_SUPPORTED);\n\tCHECK(INS_SUCCESS, RSMI_STATUS_SUCCESS);\n",
			int(LinkXGMI), int(LinkPCIe), int(LinkUndefined), smiNotSupported)
	}
	src.WriteString("\treturn bad;\n}\n")
	code := src.String()

	dir := t.TempDir()
	file := filepath.Join(dir, "abicheck.c")
	require.NoError(t, os.WriteFile(file, []byte(code), 0o600))
	// The headers, laid out as in the source tree: hip_shim.h includes the
	// GPU core's shim.h by its path relative to this package.
	pkg := filepath.Join(dir, "rocm")
	core := filepath.Join(dir, "internal", "gpu")
	require.NoError(t, os.MkdirAll(pkg, 0o700))
	require.NoError(t, os.MkdirAll(core, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "hip_shim.h"), hipShimHeader, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "smi_shim.h"), smiShimHeader, 0o600))
	for _, name := range []string{"shim.h", "shim_decl.h", "ccl.h"} {
		h, err := gpu.Headers.ReadFile(name)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(core, name), h, 0o600))
	}
	bin := filepath.Join(dir, "abicheck")
	args := []string{"-std=c11", "-Wall", "-Werror", "-I" + pkg, "-I" + hip}
	if smi != "" && smi != hip {
		args = append(args, "-I"+smi)
	}
	out, err := exec.Command(cc, append(args, "-o", bin, file)...).CombinedOutput()
	require.NoError(t, err, "compiling the check against %s:\n%s\n%s", hip, out, code)
	out, err = exec.Command(bin).CombinedOutput()
	require.NoError(t, err, "the declarations disagree with the headers:\n%s", out)
	t.Logf("%s(rocm_smi.h checked: %v)", out, smi != "")
}
