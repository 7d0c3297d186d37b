package kernels_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// TestLaunchInfo checks that only a data-movement launch on the pipelined
// path carries InfoPipelined, that it changes the Call, and that a
// Record names the path.
func TestLaunchInfo(t *testing.T) {
	for _, tt := range []struct {
		name      string
		algo      kernels.Algo
		extra     uint64
		pipelined bool
		text      string
	}{
		{"all-gather direct", kernels.AllGather, 3, false, "call 5: all_gather of 1024 float"},
		{"all-gather pipelined", kernels.AllGather, 3 | kernels.MoverPipeline, true, "call 5: pipelined all_gather of 1024 float"},
		{"reduce-scatter pipelined", kernels.ReduceScatter, kernels.MoverPipeline, true,
			"call 5: pipelined reduce_scatter of 1024 float sum"},
		{"an all-reduce ignores the bit", kernels.OneShot, kernels.MoverPipeline, false, "call 5: one_shot of 1024 float sum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			info := kernels.LaunchInfo(tt.algo, backend.Float32, backend.Sum, tt.extra)
			rec := kernels.Record{Call: kernels.CallTagOf(5, info, 1024), Count: 1024, Info: info}
			require.Equal(t, tt.pipelined, rec.Pipelined())
			require.Equal(t, tt.algo, rec.Algo())
			require.Equal(t, backend.Float32, rec.DType())
			require.Equal(t, backend.Sum, rec.Op())
			require.Equal(t, tt.text, rec.String())
			plain := kernels.CallTag(5, tt.algo, 1024, backend.Float32, backend.Sum)
			if tt.pipelined {
				require.NotEqual(t, plain, rec.Call, "the pipelined path must change the Call")
			} else {
				require.Equal(t, plain, rec.Call)
			}
			require.Equal(t, rec, kernels.DecodeRecord(kernels.EncodeRecord(rec)))
		})
	}
}
