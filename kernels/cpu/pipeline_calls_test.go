package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/race"
	"github.com/intranode/intranode/kernels"
)

// pipeChunk is the chunk size, in bytes, of the fake's Pipeline (a grid of
// one) for a message of n bytes at this world size.
func pipeChunk(n, world int) int { return kernels.PipelineChunk(n, world, 1) }

// pipeSteps is how many chunk steps the fake's Pipeline takes for n bytes.
func pipeSteps(n, world int) int {
	c := pipeChunk(n, world)
	return (n + c - 1) / c
}

// patternPeriod is the period, in elements, of tiledPatterns: a prime, so
// that no chunk size is a multiple of it and a chunk read from the wrong
// slot or step shows as a wrong result.
const patternPeriod = 65521

// tiledPatterns is makePatterns for counts of megabytes (makePatterns
// takes seconds there under the race detector): the patterns of the first
// patternPeriod elements, repeated. Every element is still the reduction
// of the inputs at its index, so the expected results stay exact.
func tiledPatterns(d backend.DType, world, count int) *patterns {
	p := makePatterns(d, world, min(count, patternPeriod))
	p.count = count
	return p
}

// pipeCase is one call of a table of back-to-back calls.
type pipeCase struct {
	algo  kernels.Algo
	d     backend.DType
	op    backend.ReduceOp
	count int
	pl    placement
}

// movesEpoch reports whether the call reads and advances the epoch: the
// one-shot's LL and push paths and every Pipeline call.
func (c pipeCase) movesEpoch(world int) bool {
	return c.algo == kernels.Pipeline || c.algo == kernels.OneShot && kernels.OneShotPath(c.count*c.d.Size(), world) != "classic"
}

// describe names the call for failure messages.
func (c pipeCase) describe(world int) string {
	s := fmt.Sprintf("%s %v %v count %d %v", c.algo, c.d, c.op, c.count, c.pl)
	switch c.algo {
	case kernels.OneShot:
		s += fmt.Sprintf(" (%s path)", kernels.OneShotPath(c.count*c.d.Size(), world))
	case kernels.Pipeline:
		s += fmt.Sprintf(" (%d steps)", pipeSteps(c.count*c.d.Size(), world))
	}
	return s
}

// runPipeCases runs the calls back to back on one group, each checked
// exactly (input unchanged and nothing written past the output when out of
// place), and then checks that every rank's epoch advanced once per call
// that moves it. The group's buffers must hold the largest call and 16
// guard bytes.
func runPipeCases(t *testing.T, g *group, cases []pipeCase) {
	t.Helper()
	largest := map[backend.DType]int{}
	for _, c := range cases {
		largest[c.d] = max(largest[c.d], c.count)
	}
	pats := map[backend.DType]*patterns{}
	for d, count := range largest {
		pats[d] = tiledPatterns(d, g.world, max(count, 1))
	}
	epochs := make([]uint32, g.world)
	for r := range g.world {
		epochs[r] = binary.LittleEndian.Uint32(g.padBytes[r][kernels.EpochWord:])
	}
	moved := uint32(0)
	for i, c := range cases {
		what := fmt.Sprintf("world %d call %d: %s", g.world, i, c.describe(g.world))
		g.checkOnce(t, c.algo, c.d, c.op, c.count, c.pl, pats[c.d], i%numSeeds, what)
		if c.movesEpoch(g.world) {
			moved++
		}
	}
	for r := range g.world {
		got := binary.LittleEndian.Uint32(g.padBytes[r][kernels.EpochWord:])
		require.Equal(t, epochs[r]+moved, got, "world %d rank %d: epoch", g.world, r)
	}
}

// TestPipelineExact checks the pipeline exactly at every world, element
// type and op over one chunk step, and with bfloat16 and int32 over one
// full chunk, two steps (the second a single element) and three (the
// first slot reused; the last chunk short and not a multiple of 16
// bytes), in every placement, back to back on pads that are never reset.
// Under the race detector each world runs each step count once, in one
// type and placement.
func TestPipelineExact(t *testing.T) {
	for _, world := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			var cases []pipeCase
			counts := []int{1, 4099}
			if race.Enabled {
				counts = counts[1:]
			}
			for _, d := range backend.DTypes {
				for _, count := range counts {
					for i, op := range ops {
						pls := []placement{outOfPlace, inPlace}
						if race.Enabled {
							pls = pls[i%2:][:1]
						}
						for _, pl := range pls {
							cases = append(cases, pipeCase{kernels.Pipeline, d, op, count, pl})
						}
					}
				}
			}
			big := 4099 * 8
			for i, d := range []backend.DType{backend.BFloat16, backend.Int32} {
				if world == 1 {
					break // no peers: one step is like any other
				}
				c := pipeChunk(1, world) / d.Size()
				for k, count := range []int{c, c + 1, 2*c + c/2 + 3} {
					n := count * d.Size()
					require.Equal(t, k+1, pipeSteps(n, world), "%v count %d", d, count)
					if k == 2 {
						require.NotZero(t, n%16, "%v count %d", d, count)
					}
					pls := placements
					if race.Enabled {
						// One dtype per step count, the other at the next world.
						if (i+k+world)%2 == 1 {
							continue
						}
						pls = placements[(k+world)%len(placements):][:1]
					}
					for _, pl := range pls {
						cases = append(cases, pipeCase{kernels.Pipeline, d, ops[(i+k)%len(ops)], count, pl})
					}
					big = max(big, n)
				}
			}
			runPipeCases(t, newGroup(world, big+16), cases)
		})
	}
}

// TestPipelineMixedSequence interleaves pipeline calls of zero to three
// chunk steps with one-shot LL and push calls (one round, and two where
// the world's push area allows) and a two-shot, all on the same pads: the
// pipeline and the LL and push paths share the epoch and the push area,
// and every result must be exact.
func TestPipelineMixedSequence(t *testing.T) {
	i32, bf16 := backend.Int32, backend.BFloat16
	worlds := []int{2, 3, 4, 8}
	if race.Enabled {
		worlds = []int{2, 3, 8} // TestPipelineChunks mixes calls at world 4
	}
	for _, world := range worlds {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			c := pipeChunk(1, world)
			ll, pushMax := kernels.OneShotLLMax(world), kernels.OneShotPushMax(world)
			pushTwo := min(kernels.PushSplitBytes/4+3, pushMax/4) // two rounds where the push area allows
			seq := []pipeCase{
				{kernels.OneShot, i32, backend.Sum, ll / 4, outOfPlace},
				{kernels.Pipeline, i32, backend.Max, c/4 + 5, inPlace},
				{kernels.OneShot, bf16, backend.Sum, ll/2 + 8, outOfPlace},
				{kernels.Pipeline, bf16, backend.Min, 100, outOfPlace},
				{kernels.Pipeline, i32, backend.Sum, 0, outOfPlace},
				{kernels.OneShot, i32, backend.Min, 7, inPlace},
				{kernels.Pipeline, bf16, backend.Sum, c + 21, inPlace},
				{kernels.OneShot, i32, backend.Max, pushTwo, outOfPlace},
				{kernels.TwoShot, i32, backend.Sum, 1000, fromBuffer},
				{kernels.Pipeline, i32, backend.Sum, c / 4, outOfPlace},
				{kernels.Pipeline, i32, backend.Max, c/2 + 1, inBuffer},
				{kernels.OneShot, i32, backend.Sum, ll/4 + 1, outOfPlace},
				{kernels.OneShot, bf16, backend.Sum, 1, outOfPlace},
				{kernels.Pipeline, bf16, backend.Sum, 1, inPlace},
			}
			paths := map[string]bool{}
			steps := map[int]bool{}
			big := 0
			for _, sc := range seq {
				n := sc.count * sc.d.Size()
				big = max(big, n)
				switch sc.algo {
				case kernels.OneShot:
					paths[kernels.OneShotPath(n, world)] = true
				case kernels.Pipeline:
					steps[pipeSteps(n, world)] = true
				}
			}
			require.Equal(t, map[string]bool{"ll": true, "push": true}, paths)
			require.Equal(t, map[int]bool{0: true, 1: true, 2: true, 3: true}, steps)
			g := newGroup(world, big+16)
			runPipeCases(t, g, seq)
			if !race.Enabled {
				rev := slices.Clone(seq)
				slices.Reverse(rev)
				runPipeCases(t, g, rev)
			}
		})
	}
}

// TestPipelineCallAgreement: a pipeline call against a different call of
// the same sequence number ends on every rank with StatusMismatch naming
// another rank, without writing the output, and leaves each rank's record
// of its own call. That includes a one-shot LL rank: the fake's LL spins
// watch the peers' Calls like its other spins, whereas the device's LL
// spins watch only the status word and wait for their deadline.
func TestPipelineCallAgreement(t *testing.T) {
	bf16 := backend.BFloat16
	two := pipeChunk(1, 2)/bf16.Size() + 8            // two chunk steps at world 2
	push2 := kernels.OneShotLLMax(2)/bf16.Size() + 64 // the one-shot's push path at world 2
	push4 := kernels.OneShotLLMax(4)/bf16.Size() + 64 // and at world 4
	base := call{algo: kernels.Pipeline, dtype: bf16, op: backend.Sum, count: two, seq: 7}
	cases := []callCase{
		{"same calls", 2, nil, true},
		{"same calls world 4", 4, nil, true},
		{"one-shot push of the same count", 2, map[int]call{
			0: base.with(func(c *call) { c.count = push2 }),
			1: base.with(func(c *call) { c.algo = kernels.OneShot; c.count = push2 })}, false},
		{"one-shot push of another count", 2, map[int]call{
			1: base.with(func(c *call) { c.algo = kernels.OneShot; c.count = push2 })}, false},
		{"count", 2, map[int]call{1: base.with(func(c *call) { c.count = two + 1 })}, false},
		{"count of another step count", 2, map[int]call{1: base.with(func(c *call) { c.count = 100 })}, false},
		{"op", 2, map[int]call{1: base.with(func(c *call) { c.op = backend.Max })}, false},
		{"dtype of the same bytes", 2, map[int]call{
			1: base.with(func(c *call) { c.dtype = backend.Float32; c.count = two / 2 })}, false},
		{"skipped call", 2, map[int]call{1: base.with(func(c *call) { c.seq = 8 })}, false},
		{"two-shot", 2, map[int]call{
			0: base.with(func(c *call) { c.count = 4096 }),
			1: base.with(func(c *call) { c.algo = kernels.TwoShot; c.count = 4096 })}, false},
		{"one of four makes a one-shot push call", 4, map[int]call{
			0: base.with(func(c *call) { c.count = push4 }), 1: base.with(func(c *call) { c.count = push4 }),
			2: base.with(func(c *call) { c.algo = kernels.OneShot; c.count = push4 }),
			3: base.with(func(c *call) { c.count = push4 })}, false},
		{"one-shot LL", 2, map[int]call{
			0: base.with(func(c *call) { c.count = 64 }),
			1: base.with(func(c *call) { c.algo = kernels.OneShot; c.count = 64 })}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			callOf := callsOf(base, tc.calls)
			size := 0
			for r := range tc.world {
				c := callOf(r)
				size = max(size, c.count*c.dtype.Size())
			}
			g := newGroup(tc.world, size)
			for r := range tc.world {
				for i := range g.outBytes[r] {
					g.outBytes[r][i] = guard
				}
			}
			errs := g.runCalls(ctx, tc.world, callOf)
			if tc.match {
				g.requireClean(t, errs, tc.name)
				return
			}
			for r := range tc.world {
				ch := g.requireMismatch(t, errs[r], r, callOf(r))
				require.Zero(t, ch, "rank %d: channel", r)
				require.Equal(t, bytes.Repeat([]byte{guard}, size), g.outBytes[r], "rank %d wrote its output", r)
			}
		})
	}
}

// TestPipelineMissingPeer: with a rank absent, the others send their first
// chunk and then time out waiting for it, naming it and channel 0.
func TestPipelineMissingPeer(t *testing.T) {
	const world, missing = 4, 2
	d := backend.Int32
	count := pipeChunk(1, world)/d.Size() + 5 // two chunk steps
	g := newGroup(world, count*d.Size())
	fn := AllReduce(kernels.Pipeline, d)
	ctx := testCtx(t)
	errs := runRanks([]int{0, 1, 3}, func(r int) error {
		a := g.allReduceArgs(r, g.in[r], g.out[r], count, d, backend.Sum)
		a.TimeoutNs = uint64(200 * time.Millisecond)
		a.Call = kernels.CallTag(1, kernels.Pipeline, uint64(count), d, backend.Sum)
		return fn(ctx, g.mem, noConfig, a.Args())
	})
	g.requireTimeout(t, errs, missing, 0)
}

// TestPipelinePeerStops follows one rank step by step against a peer that
// is played by hand: the peer publishes its call, writes its first chunk
// into slot 0 of half s = E mod 2 and signals once, then stops. The rank
// reduces that chunk, having written its first two chunks into the peer's
// slots of half s and signalled twice, and times out waiting for the
// second chunk, its output past the first chunk untouched and its epoch
// E+1.
func TestPipelinePeerStops(t *testing.T) {
	const world = 2
	d, op := backend.Int32, backend.Sum
	chunk := pipeChunk(1, world)
	count := (2*chunk + chunk/2) / d.Size() // three chunk steps
	n := count * d.Size()
	pat := tiledPatterns(d, world, count)
	for _, tc := range []struct {
		epoch uint32
		seq   uint32
	}{{0, 5}, {1, 6}, {7, 1}, {math.MaxUint32, 2}} {
		t.Run(fmt.Sprintf("epoch%d", tc.epoch), func(t *testing.T) {
			s := int(tc.epoch % 2)
			g := newGroup(world, n+16)
			binary.LittleEndian.PutUint32(g.padBytes[0][kernels.EpochWord:], tc.epoch)
			pat.fillInput(g.inBytes[0][:n], 0, 0)
			for i := range g.outBytes[0] {
				g.outBytes[0][i] = guard
			}
			callTag := kernels.CallTag(tc.seq, kernels.Pipeline, uint64(count), d, op)
			parity := int(tc.seq % 2)
			// The peer, rank 1: its Call, its first chunk, one signal.
			binary.LittleEndian.PutUint64(g.padBytes[0][kernels.CallInWord(1, parity):], callTag)
			copy(g.padBytes[0][kernels.PipelineSlot(n, world, s, 1, 0, 0, 1, 0):], pat.input(0, 1, chunk))
			sa := g.signalArgs(1)
			sa.Peer = 0
			ctx := testCtx(t)
			require.NoError(t, PutSignal(ctx, g.mem, noConfig, sa.Args()))

			a := g.allReduceArgs(0, g.in[0], g.out[0], count, d, op)
			a.TimeoutNs = uint64(100 * time.Millisecond)
			a.Call = callTag
			require.NoError(t, AllReduce(kernels.Pipeline, d)(ctx, g.mem, noConfig, a.Args()))
			code, peer, ch := kernels.DecodeStatus(g.statusOf(0))
			require.Equal(t, []int{kernels.StatusTimeout, 1, 0}, []int{code, peer, ch}, "status code, peer, channel")

			require.Equal(t, pat.wantN(0, op, chunk), g.outBytes[0][:chunk], "the first chunk is reduced")
			require.Equal(t, bytes.Repeat([]byte{guard}, n+16-chunk), g.outBytes[0][chunk:], "nothing after it")
			for j := range 2 {
				off := kernels.PipelineSlot(n, world, s, 0, 1, 0, 1, j)
				require.Equal(t, pat.input(0, 0, (j+1)*chunk)[j*chunk:], g.padBytes[1][off:off+chunk], "chunk %d in the peer's slot %d", j, j)
			}
			other := kernels.PushData(world, 1-s, 0, 1)
			require.Equal(t, make([]byte, kernels.OneShotPushMax(world)), g.padBytes[1][other:other+kernels.OneShotPushMax(world)],
				"nothing in the other half")
			word := func(r, off int) uint32 { return binary.LittleEndian.Uint32(g.padBytes[r][off:]) }
			require.Equal(t, uint32(2), word(0, kernels.SentWord(0, 1)), "signals sent")
			require.Equal(t, uint32(2), word(1, kernels.InboxWord(0, 0)), "signals in the peer's inbox")
			require.Equal(t, uint32(1), word(0, kernels.RecvWord(0, 1)), "signals consumed")
			require.Equal(t, tc.epoch+1, word(0, kernels.EpochWord), "epoch")
			require.Equal(t, callTag, binary.LittleEndian.Uint64(g.padBytes[1][kernels.CallInWord(0, parity):]), "the Call in the peer's pad")
			rec := kernels.DecodeRecord(g.padBytes[0][kernels.RecordOffset:])
			require.Equal(t, kernels.Record{Call: callTag, Count: uint64(count), Info: kernels.CallInfo(kernels.Pipeline, d, op)}, rec)
		})
	}
}

// TestPipelineZeroCount: a pipeline call of no elements has no chunk, so it
// sends and waits for nothing (the CUDA kernel's blocks skip both steps when
// they have no chunk), writes nothing, and still leaves its record and
// advances the epoch, like every pipeline call. The calls after it stay in
// step.
func TestPipelineZeroCount(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		g := newGroup(2, 64)
		for i := range g.outBytes[0] {
			g.outBytes[0][i] = guard
		}
		a := g.allReduceArgs(0, g.in[0], g.out[0], 0, backend.Float32, backend.Sum)
		a.TimeoutNs = 0 // any wait would give up at once
		a.Call = kernels.CallTag(9, kernels.Pipeline, 0, backend.Float32, backend.Sum)
		require.NoError(t, AllReduce(kernels.Pipeline, backend.Float32)(testCtx(t), g.mem, noConfig, a.Args()))
		require.Zero(t, g.statusOf(0))
		require.Equal(t, bytes.Repeat([]byte{guard}, 64), g.outBytes[0])
		require.Equal(t, uint32(1), binary.LittleEndian.Uint32(g.padBytes[0][kernels.EpochWord:]))
		rec := kernels.DecodeRecord(g.padBytes[0][kernels.RecordOffset:])
		require.Equal(t, a.Call, rec.Call)
		require.Zero(t, rec.Count)
		require.Equal(t, kernels.Pipeline, rec.Algo())
		require.Zero(t, binary.LittleEndian.Uint32(g.padBytes[0][kernels.SentWord(0, 1):]), "no signal")
	})
	t.Run("between calls", func(t *testing.T) {
		const world = 3
		i32 := backend.Int32
		c := pipeChunk(1, world) / i32.Size()
		seq := []pipeCase{
			{kernels.Pipeline, i32, backend.Sum, 0, outOfPlace},
			{kernels.Pipeline, i32, backend.Sum, 0, inPlace},
			{kernels.Pipeline, i32, backend.Sum, c + 3, outOfPlace},
			{kernels.Pipeline, i32, backend.Sum, 0, outOfPlace},
			{kernels.OneShot, i32, backend.Sum, kernels.OneShotLLMax(world)/4 + 3, outOfPlace},
			{kernels.Pipeline, i32, backend.Max, 0, outOfPlace},
			{kernels.OneShot, i32, backend.Max, 5, outOfPlace},
		}
		runPipeCases(t, newGroup(world, (c+3)*i32.Size()+16), seq)
	})
}

// TestPipelineBadArgs: the pipeline checks its arguments like the other
// algorithms, recording StatusBadArgs and returning ErrInvalidArgument. It
// does not care how large the symmetric buffers are.
func TestPipelineBadArgs(t *testing.T) {
	g := newGroup(2, 4096)
	tests := []struct {
		name   string
		mutate func(*kernels.AllReduceArgs)
	}{
		{"dtype mismatch", func(a *kernels.AllReduceArgs) { a.DType = backend.Float16 }},
		{"invalid op", func(a *kernels.AllReduceArgs) { a.Op = 3 }},
		{"world nine", func(a *kernels.AllReduceArgs) { a.World = 9 }},
		{"count beyond the input", func(a *kernels.AllReduceArgs) { a.Count = 4096/4 + 1 }},
		{"output out of bounds", func(a *kernels.AllReduceArgs) { a.Output = g.out[0].Add(4090) }},
		{"input misaligned", func(a *kernels.AllReduceArgs) { a.Input = g.in[0].Add(2) }},
		{"output misaligned", func(a *kernels.AllReduceArgs) { a.Output = g.out[0].Add(6) }},
		{"pad table unmapped", func(a *kernels.AllReduceArgs) { a.Pads = 8 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := g.allReduceArgs(0, g.in[0], g.out[0], 16, backend.Float32, backend.Sum)
			tt.mutate(&a)
			err := AllReduce(kernels.Pipeline, backend.Float32)(testCtx(t), g.mem, noConfig, a.Args())
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			code, _, _ := kernels.DecodeStatus(g.statusOf(0))
			require.Equal(t, kernels.StatusBadArgs, code)
		})
	}
	t.Run("count beyond the buffers", func(t *testing.T) {
		// Symmetric buffers of 64 bytes, inputs and outputs of 8 KiB.
		const count = 2048
		d := backend.Float32
		small := newGroup(2, 64)
		pat := makePatterns(d, 2, count)
		in, out := make([]backend.DevicePtr, 2), make([][]byte, 2)
		for r := range 2 {
			var b []byte
			in[r], b = small.mem.alloc(count * d.Size())
			copy(b, pat.inputs[2][r])
		}
		outPtrs := make([]backend.DevicePtr, 2)
		for r := range 2 {
			outPtrs[r], out[r] = small.mem.alloc(count * d.Size())
		}
		errs := small.launchAll(t, kernels.Pipeline, d, func(r int) kernels.AllReduceArgs {
			return small.allReduceArgs(r, in[r], outPtrs[r], count, d, backend.Min)
		})
		small.requireClean(t, errs, "pipeline with small buffers")
		for r := range 2 {
			require.Equal(t, pat.want(2, backend.Min), out[r], "rank %d", r)
		}
	})
}
