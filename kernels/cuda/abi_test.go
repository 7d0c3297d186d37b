package cudakernels

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/kernels"
)

// TestSourceMatchesABI: the device sources mirror kernels/abi.go's layout
// by hand; a constant that drifts makes the kernels read or write the
// wrong part of the pad.
func TestSourceMatchesABI(t *testing.T) {
	src, err := os.ReadFile("intranode.cuh")
	require.NoError(t, err)
	define := func(name string) int {
		m := regexp.MustCompile(`#define ` + name + ` \((\d+)ull << (\d+)\)`).FindSubmatch(src)
		require.NotNil(t, m, "#define %s", name)
		v, _ := strconv.Atoi(string(m[1]))
		sh, _ := strconv.Atoi(string(m[2]))
		return v << sh
	}
	constant := func(expr string) {
		require.Contains(t, string(src), expr)
	}
	require.Equal(t, kernels.LLSize, define("INTRANODE_LL_SIZE"))
	require.Equal(t, kernels.OneShotLLMaxBytes, define("INTRANODE_LL_MAX_BYTES"))
	require.Equal(t, kernels.PushSize, define("INTRANODE_PUSH_SIZE"))
	require.Equal(t, kernels.OneShotPushMaxBytes, define("INTRANODE_PUSH_MAX_BYTES"))
	require.Equal(t, kernels.PushSplitBytes, define("INTRANODE_PUSH_SPLIT_BYTES"))
	require.Equal(t, kernels.PipelineWideBytes, define("INTRANODE_PIPE_WIDE_BYTES"))
	constant("kNumChannels = " + strconv.Itoa(kernels.NumChannels) + ";")
	constant("kKernelChannels = " + strconv.Itoa(kernels.KernelChannels) + ";")
	constant("kStateSize = " + strconv.Itoa(kernels.StateSize) + ";")
	constant("kRecordOffset = kStateOffset + " + strconv.Itoa(kernels.RecordOffset-kernels.StateOffset) + ";")
	constant("kCallInOffset = kStateOffset + " + strconv.Itoa(kernels.CallInOffset-kernels.StateOffset) + ";")
	constant("kStatusMismatch = " + strconv.Itoa(kernels.StatusMismatch) + ";")
}
