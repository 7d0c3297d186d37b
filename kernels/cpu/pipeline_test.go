package cpu

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// TestPipelineChunks runs the pipeline over several chunk slots (a grid of
// one moves kernels.PipelineChunk(world, 1) bytes per step), in place and
// out of place, back to back with one-shot push calls that share the push
// area and the epoch, and checks every result exactly and the epoch count.
func TestPipelineChunks(t *testing.T) {
	d := backend.Int32
	for _, world := range []int{2, 4} {
		chunk := kernels.PipelineChunk(world, 1)
		require.Positive(t, chunk)
		steps := 3
		if raceEnabled {
			steps = 2
		}
		big := (steps*chunk - 100) / d.Size() // the last chunk is short and not a multiple of 16 bytes
		push := kernels.OneShotLLMax(world)/d.Size() + 7
		g := newGroup(world, big*d.Size())
		pat := makePatterns(d, world, big)
		epochs := 0
		for rep := range 2 {
			for i, pl := range []placement{outOfPlace, inPlace} {
				what := fmt.Sprintf("world %d pipeline %d elements %v", world, big, pl)
				g.checkOnce(t, kernels.Pipeline, d, backend.Sum, big, pl, pat, (rep+i)%numSeeds, what)
				what = fmt.Sprintf("world %d one-shot push %d elements", world, push)
				g.checkOnce(t, kernels.OneShot, d, backend.Sum, push, outOfPlace, pat, (rep+i+1)%numSeeds, what)
				epochs += 2
			}
		}
		for r := range world {
			got := binary.LittleEndian.Uint32(g.padBytes[r][kernels.EpochWord:])
			require.Equal(t, uint32(epochs), got, "world %d rank %d: epoch", world, r)
		}
	}
}

// TestPipelineLayout pins the chunk slots: two per block region, inside the
// sender's region of the push area's half, none past it.
func TestPipelineLayout(t *testing.T) {
	for _, tc := range []struct{ world, grid int }{{2, 1}, {2, 64}, {2, 128}, {4, 128}, {8, 128}} {
		c := kernels.PipelineChunk(tc.world, tc.grid)
		require.Positive(t, c, "%+v", tc)
		require.Zero(t, c%16, "%+v", tc)
		region := kernels.OneShotPushMax(tc.world)
		for s := range 2 {
			base := kernels.PushData(tc.world, s, 0, 1)
			last := kernels.PipelineSlot(tc.world, s, 0, 1, tc.grid-1, tc.grid, 1)
			require.LessOrEqual(t, last+c, base+region, "%+v slot %d", tc, s)
			require.Equal(t, base, kernels.PipelineSlot(tc.world, s, 0, 1, 0, tc.grid, 0), "%+v", tc)
		}
	}
	require.Zero(t, kernels.PipelineChunk(8, 1<<20), "a grid too large for the push area")
	require.Zero(t, kernels.PipelineChunk(2, 0))
}
