package collective

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
	"github.com/intranode/intranode/kernels"
)

func TestParseAlgo(t *testing.T) {
	for _, a := range []Algo{None, OneShot, TwoShot, HCM} {
		got, err := ParseAlgo(a.String())
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	got, err := ParseAlgo("One-Shot")
	require.NoError(t, err)
	require.Equal(t, OneShot, got)
	_, err = ParseAlgo("threeshot")
	require.Error(t, err)
}

func TestThresholdsSelect(t *testing.T) {
	tab := Thresholds{OneShotMax: 1024, KernelMax: 4096}
	for _, tc := range []struct {
		n    int
		want Algo
	}{{1, OneShot}, {1024, OneShot}, {1025, TwoShot}, {4096, TwoShot}, {4097, None}} {
		require.Equal(t, tc.want, tab.Select(tc.n), "n=%d", tc.n)
	}
	require.Equal(t, TwoShot, Thresholds{OneShotMax: 10}.Select(1<<30), "no kernel limit")
	pipe := Thresholds{OneShotMax: 1024, PipelineMin: 4096, KernelMax: 1 << 20}
	for _, tc := range []struct {
		n    int
		want Algo
	}{{1024, OneShot}, {4095, TwoShot}, {4096, Pipeline}, {1 << 20, Pipeline}, {1<<20 + 1, None}} {
		require.Equal(t, tc.want, pipe.Select(tc.n), "pipeline table, n=%d", tc.n)
	}
	for _, w := range []int{2, 4, 8} {
		for _, b := range []string{"cuda", "fake", "rocm"} {
			tab := DefaultThresholds(b, w)
			require.Positive(t, tab.OneShotMax)
			require.True(t, tab.KernelMax == 0 || tab.KernelMax >= tab.OneShotMax)
			require.True(t, tab.PipelineMin == 0 || tab.PipelineMin > tab.OneShotMax)
		}
	}
}

// TestAverageWindow: an average all-reduce keeps the kernels' path up to
// AvgMax and goes to the vendor library above it; without a limit (the
// fake) it keeps it at every size.
func TestAverageWindow(t *testing.T) {
	for world, max := range map[int]int{2: 64 << 20, 4: 4 << 20, 8: 4 << 20} {
		tab := DefaultThresholds("cuda", world)
		require.Equal(t, TwoShot, tab.averaged(max, TwoShot), "world %d", world)
		require.Equal(t, None, tab.averaged(max+1, TwoShot), "world %d", world)
	}
	require.Equal(t, Pipeline, DefaultThresholds("fake", 2).averaged(1<<30, Pipeline))
}

func TestMoverWindows(t *testing.T) {
	w := Window{Min: 1 << 20, Max: 4 << 20}
	for _, tc := range []struct {
		n    int
		want bool
	}{{1<<20 - 1, false}, {1 << 20, true}, {4 << 20, true}, {4<<20 + 1, false}} {
		require.Equal(t, tc.want, w.Contains(tc.n), "n=%d", tc.n)
	}
	require.True(t, Window{}.Contains(1<<40), "the zero window holds every size")
	require.False(t, Never.Contains(1<<40))
	// The CUDA tables name every data-movement collective; where they were
	// not measured (world 8), NCCL takes every size; at world 4 the Direct
	// kernels take the small sizes and NCCL 16 MiB (measured slower there),
	// but for the all-gather, whose Direct kernel wins to 16 MiB.
	for _, world := range []int{2, 4, 8} {
		tab := DefaultThresholds("cuda", world)
		for _, o := range Ops[1:] {
			win, ok := tab.Movers[o]
			require.True(t, ok, "world %d %v", world, o)
			switch world {
			case 4:
				require.True(t, win.Contains(1024), "world 4 %v: 1 KiB to the kernels", o)
				require.Equal(t, o == OpAllGather, win.Contains(16<<20), "world 4 %v at 16 MiB", o)
			case 8:
				require.Equal(t, Never, win)
			}
		}
	}
	require.Empty(t, DefaultThresholds("fake", 2).Movers, "the fake has no vendor library: always its kernels")
	// World 2 on CUDA: the pipelined kernels from just over 8 MiB (the
	// broadcast to 64 MiB, NCCL above), the Direct ones below.
	w2 := DefaultThresholds("cuda", 2)
	for _, tc := range []struct {
		op   Op
		n    int
		want Algo
	}{
		{OpReduceScatter, 1 << 10, Direct}, {OpReduceScatter, 8 << 20, Direct}, {OpReduceScatter, 8<<20 + 1, Pipeline},
		{OpReduceScatter, 256 << 20, Pipeline}, {OpAllGather, 16 << 20, Pipeline}, {OpAllToAll, 1 << 30, Pipeline},
		{OpBroadcast, 8 << 20, Direct}, {OpBroadcast, 64 << 20, Pipeline}, {OpBroadcast, 64<<20 + 1, None},
	} {
		require.Equal(t, tc.want, w2.SelectMover(tc.op, tc.n), "%v of %d bytes", tc.op, tc.n)
	}
	// World 4 on CUDA: the pipelined all-gather above 16 MiB, NCCL for the
	// others there; world 8: NCCL.
	w4 := DefaultThresholds("cuda", 4)
	for _, tc := range []struct {
		op   Op
		n    int
		want Algo
	}{
		{OpAllGather, 16 << 20, Direct}, {OpAllGather, 16<<20 + 1, Pipeline}, {OpAllGather, 256 << 20, Pipeline},
		{OpReduceScatter, 4 << 20, Direct}, {OpReduceScatter, 256 << 20, None}, {OpAllToAll, 256 << 20, None},
		{OpBroadcast, 256 << 10, Direct}, {OpBroadcast, 256 << 20, None},
	} {
		require.Equal(t, tc.want, w4.SelectMover(tc.op, tc.n), "world 4 %v of %d bytes", tc.op, tc.n)
	}
	for _, o := range Ops[1:] {
		require.NotEqual(t, Pipeline, DefaultThresholds("cuda", 8).SelectMover(o, 256<<20), "world 8 %v", o)
	}
	require.Equal(t, Direct, DefaultThresholds("fake", 2).SelectMover(OpAllGather, 256<<20))
	// The copy engines: at world 2 on CUDA the broadcast and all-to-all
	// from 64 MiB, the all-gather from 256 MiB, never a reduction; no
	// window where they were not measured.
	for _, tc := range []struct {
		op   Op
		n    int
		want bool
	}{
		{OpBroadcast, 64<<20 - 1, false}, {OpBroadcast, 64 << 20, true}, {OpAllToAll, 64 << 20, true},
		{OpAllGather, 64 << 20, false}, {OpAllGather, 256 << 20, true}, {OpReduceScatter, 1 << 30, false},
	} {
		w, ok := w2.Copy[tc.op]
		require.Equal(t, tc.want, ok && w.Contains(tc.n), "world 2 copy %v of %d bytes", tc.op, tc.n)
	}
	require.Empty(t, w4.Copy, "world 4: not measured")
}

func TestOpNamesAndFactors(t *testing.T) {
	for _, o := range Ops {
		got, err := ParseOp(o.String())
		require.NoError(t, err)
		require.Equal(t, o, got)
	}
	got, err := ParseOp("all_to_all")
	require.NoError(t, err)
	require.Equal(t, OpAllToAll, got)
	_, err = ParseOp("gather")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	for _, o := range Ops {
		require.Equal(t, o == OpAllReduce || o == OpReduceScatter, o.Reduces(), "%v", o)
	}
	require.InDelta(t, 1.5, OpAllReduce.BusFactor(4), 1e-12)
	require.InDelta(t, 0.75, OpAllGather.BusFactor(4), 1e-12)
	require.InDelta(t, 1.0, OpBroadcast.BusFactor(8), 1e-12)
	in, out := OpReduceScatter.Elements(10, 4)
	require.Equal(t, []int{40, 10}, []int{in, out})
}

func TestReference(t *testing.T) {
	in := func(r, j int) float64 { return float64(100*r + j) }
	sum := func(a, b float64) float64 { return a + b }
	const world, count = 3, 2
	// Rank 1's outputs.
	require.Equal(t, float64(0+2+100+2+200+2), OpReduceScatter.Reference(in, sum, world, 1, 0, count, 0))
	require.Equal(t, float64(201), OpAllGather.Reference(in, sum, world, 1, 0, count, 5))
	require.Equal(t, float64(201), OpBroadcast.Reference(in, sum, world, 1, 2, count, 1))
	require.Equal(t, float64(203), OpAllToAll.Reference(in, sum, world, 1, 0, count, 5))
	require.Equal(t, float64(0+100+200+3), OpAllReduce.Reference(in, sum, world, 1, 0, count, 1))
}

func TestLaunchConfigSameForEveryRankAndBounded(t *testing.T) {
	for _, algo := range []Algo{OneShot, TwoShot, HCM} {
		for _, bytes := range []int{1, 16, 1 << 10, 1 << 20, 10 << 20, 1 << 30} {
			for _, w := range []int{2, 4, 8} {
				cfg := LaunchConfig("cuda", algo, bytes, w)
				require.Equal(t, cfg, LaunchConfig("cuda", algo, bytes, w))
				require.GreaterOrEqual(t, cfg.Grid.X, uint32(1))
				require.LessOrEqual(t, cfg.Grid.X, uint32(kernels.KernelChannels), "kernels use channels [0,KernelChannels)")
				require.Equal(t, uint32(512), cfg.Block.X)
			}
		}
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	h := handshake{Host: "node-17.example", Device: 5}
	require.Equal(t, h, decodeHandshake(encodeHandshake(h)))
	long := handshake{Host: string(make([]byte, 100)), Device: 1}
	require.Len(t, decodeHandshake(encodeHandshake(long)).Host, 0, "NUL padding is trimmed")
}

func TestGroupMatrixOverlap(t *testing.T) {
	m := connectivity.NewMatrix(connectivity.LinkNVLink, 2)
	m.Set(0, 1, 18)
	m.Set(1, 0, 18)
	topo, err := detect(m, []int{0, 1})
	require.NoError(t, err)
	require.Equal(t, connectivity.FullyConnected, topo)
	// Ranks sharing a device reach each other through it.
	topo, err = detect(m, []int{0, 0})
	require.NoError(t, err)
	require.Equal(t, connectivity.FullyConnected, topo)
	pcie := connectivity.NewMatrix(connectivity.LinkNVLink, 2)
	topo, err = detect(pcie, []int{0, 1})
	require.NoError(t, err)
	require.Equal(t, connectivity.Unknown, topo)
	_, err = detect(m, []int{0, 3})
	require.Error(t, err)
}

// TestPipelineLaunchConfig: every rank computes the same grid from the size
// alone, within the channels, with chunk slots the push area holds.
func TestPipelineLaunchConfig(t *testing.T) {
	for _, w := range []int{2, 3, 4, 8} {
		for _, n := range []int{1, 16, 64 << 10, 4 << 20, 256 << 20} {
			cfg := LaunchConfig("cuda", Pipeline, n, w)
			g := int(cfg.Grid.X)
			require.True(t, g >= 1 && g <= kernels.KernelChannels, "world %d, %d bytes: grid %d", w, n, g)
			require.Positive(t, kernels.PipelineChunk(n, w, g), "world %d, %d bytes: grid %d", w, n, g)
			require.True(t, cfg.Early)
		}
	}
	require.Equal(t, uint32(kernels.KernelChannels), LaunchConfig("cuda", Pipeline, 32<<20, 2).Grid.X)
	require.Equal(t, uint32(kernels.KernelChannels), LaunchConfig("cuda", Pipeline, 256<<20, 2).Grid.X)
	// A block per 8 KiB at world 2, per 64 KiB from three ranks on
	// (pipelineBlockBytes), the pipelined data-movement kernels alike.
	for _, tc := range []struct {
		n, world int
		grid     uint32
	}{
		{n: 8 << 10, world: 2, grid: 1},
		{n: 512 << 10, world: 2, grid: 64},
		{n: 1 << 20, world: 2, grid: 128},
		{n: 1 << 20, world: 4, grid: 16},
	} {
		require.Equal(t, tc.grid, LaunchConfig("cuda", Pipeline, tc.n, tc.world).Grid.X, "all-reduce, %d bytes, world %d", tc.n, tc.world)
		require.Equal(t, tc.grid, moverPipelineLaunchConfig(OpAllGather, tc.n, tc.world).Grid.X,
			"all-gather, %d bytes, world %d", tc.n, tc.world)
	}
}

// The data-movement kernels' grid: on the LL path the one-shot LL's for a
// rank's block (one block below 16 KiB, 2 KiB a block above, at most
// KernelChannels), past it a block per 32 KiB moved, at most 64.
func TestMoverLaunchConfig(t *testing.T) {
	for _, tc := range []struct {
		n, bytes, world int
		grid            uint32
	}{
		{n: 1024, bytes: 4096, world: 2, grid: 1},
		{n: 16 << 10, bytes: 64 << 10, world: 2, grid: 8},
		{n: 256 << 10, bytes: 1 << 20, world: 2, grid: 128},      // the LL bound at world 2
		{n: 256<<10 + 16, bytes: 1<<20 + 64, world: 2, grid: 33}, // the push path: 32 KiB a block
		{n: 64 << 10, bytes: 1 << 20, world: 8, grid: 32},        // over the LL bound at world 8
		{n: 32 << 10, bytes: 1 << 20, world: 8, grid: 16},        // under it
		{n: 8 << 20, bytes: 64 << 20, world: 8, grid: 64},
	} {
		cfg := moverLaunchConfig(tc.n, tc.bytes, tc.world)
		require.Equal(t, tc.grid, cfg.Grid.X, "n=%d bytes=%d world=%d", tc.n, tc.bytes, tc.world)
		require.Equal(t, uint32(512), cfg.Block.X)
		require.True(t, cfg.Early)
	}
}
