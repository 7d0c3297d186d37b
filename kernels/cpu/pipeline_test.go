package cpu

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/race"
	"github.com/intranode/intranode/kernels"
)

// TestPipelineChunks runs the pipeline over several chunk slots (a grid of
// one moves kernels.PipelineChunk(n, world, 1) bytes per step), in place and
// out of place, back to back with one-shot push calls that share the push
// area and the epoch, and checks every result exactly and the epoch count.
func TestPipelineChunks(t *testing.T) {
	d := backend.Int32
	for _, world := range []int{2, 4} {
		chunk := kernels.PipelineChunk(1, world, 1)
		require.Positive(t, chunk)
		steps := 3
		if race.Enabled {
			steps = 2
		}
		big := (steps*chunk - 100) / d.Size() // the last chunk is short and not a multiple of 16 bytes
		push := kernels.OneShotLLMax(world)/d.Size() + 7
		g := newGroup(world, big*d.Size())
		pat := tiledPatterns(d, world, big)
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

// TestPipelineLayout pins the chunk slots: two per block region (four
// where the Pipeline scatters), inside the sender's region of the push
// area's half, none past it.
func TestPipelineLayout(t *testing.T) {
	for _, tc := range []struct{ world, grid int }{{2, 1}, {2, 64}, {2, 128}} {
		require.False(t, kernels.PipelineScatters(tc.world))
		c := kernels.PipelineChunk(1, tc.world, tc.grid)
		require.Positive(t, c, "%+v", tc)
		require.Zero(t, c%16, "%+v", tc)
		region := kernels.OneShotPushMax(tc.world)
		for s := range 2 {
			base := kernels.PushData(tc.world, s, 0, 1)
			last := kernels.PipelineSlot(1, tc.world, s, 0, 1, tc.grid-1, tc.grid, 1)
			require.LessOrEqual(t, last+c, base+region, "%+v slot %d", tc, s)
			require.Equal(t, base, kernels.PipelineSlot(1, tc.world, s, 0, 1, 0, tc.grid, 0), "%+v", tc)
			// Wide: slot 1 is the same block region in the other half.
			wide := kernels.PipelineWideBytes + 1
			require.Equal(t, region/tc.grid&^15, kernels.PipelineChunk(wide, tc.world, tc.grid), "%+v", tc)
			require.Equal(t, kernels.PushData(tc.world, 1-s, 0, 1)+(tc.grid-1)*(region/tc.grid&^15),
				kernels.PipelineSlot(wide, tc.world, s, 0, 1, tc.grid-1, tc.grid, 1), "%+v", tc)
		}
	}
	// Scattered (three ranks on): four slots of one slice per block
	// region, a chunk of World slices, none past the sender's region.
	for _, tc := range []struct{ world, grid int }{{3, 1}, {4, 1}, {4, 128}, {8, 64}, {8, 128}} {
		require.True(t, kernels.PipelineScatters(tc.world))
		q := kernels.PipelineSlice(tc.world, tc.grid)
		require.Positive(t, q, "%+v", tc)
		require.Zero(t, q%16, "%+v", tc)
		require.Equal(t, tc.world*q, kernels.PipelineChunk(1, tc.world, tc.grid), "%+v", tc)
		require.Equal(t, tc.world*q, kernels.PipelineChunk(kernels.PipelineWideBytes+1, tc.world, tc.grid), "never wide")
		region := kernels.OneShotPushMax(tc.world)
		block := region / tc.grid &^ 15
		for s := range 2 {
			base := kernels.PushData(tc.world, s, 0, 1)
			for b := range tc.grid {
				for k := range 4 {
					off := kernels.PipelineScatterSlot(tc.world, s, 0, 1, b, tc.grid, k)
					require.Equal(t, base+b*block+k*q, off, "%+v block %d slot %d", tc, b, k)
					require.LessOrEqual(t, off+q, base+region, "%+v block %d slot %d", tc, b, k)
				}
			}
		}
	}
	require.Zero(t, kernels.PipelineSlice(8, 1<<20), "a grid too large for the push area")
	require.Zero(t, kernels.PipelineChunk(1, 8, 1<<20), "a grid too large for the push area")
	require.Zero(t, kernels.PipelineChunk(1, 2, 0))
}

// TestPipelineWide runs wide calls (over kernels.PipelineWideBytes: chunk
// slots in both halves of the push area) with an even number of chunks, so
// each ends with the closing exchange, between one-shot push calls on the
// same pads; the signal counts and the epoch must stay in step.
func TestPipelineWide(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 48 MiB per rank per call")
	}
	const world = 2
	d := backend.Int32
	n := kernels.PipelineWideBytes + 16<<20 - 100 // six 8 MiB chunks, the last short
	require.Zero(t, (n/kernels.PipelineChunk(n, world, 1)+1)%2, "an even number of chunks")
	count := n / d.Size()
	push := kernels.OneShotLLMax(world)/d.Size() + 7
	g := newGroup(world, n)
	pat := tiledPatterns(d, world, count)
	for i, pl := range []placement{outOfPlace, inPlace} {
		g.checkOnce(t, kernels.Pipeline, d, backend.Sum, count, pl, pat, i, fmt.Sprintf("wide pipeline %v", pl))
		g.checkOnce(t, kernels.OneShot, d, backend.Sum, push, outOfPlace, pat, i+1, "one-shot push after a wide pipeline")
	}
	for r := range world {
		got := binary.LittleEndian.Uint32(g.padBytes[r][kernels.EpochWord:])
		require.Equal(t, uint32(4), got, "rank %d: epoch", r)
	}
}
