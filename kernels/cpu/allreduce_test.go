package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/internal/race"
	"github.com/intranode/intranode/kernels"
)

var ops = []backend.ReduceOp{backend.Sum, backend.Max, backend.Min}

// placement says where a rank's input and output are.
type placement int

const (
	outOfPlace placement = iota // private input, private output
	inPlace                     // one private buffer, input == output
	fromBuffer                  // input is the rank's symmetric buffer, private output
	inBuffer                    // input == output == the rank's symmetric buffer
)

func (p placement) String() string {
	return [...]string{"out-of-place", "in-place", "from-buffer", "in-buffer"}[p]
}

var placements = []placement{outOfPlace, inPlace, fromBuffer, inBuffer}

// where returns rank r's input and output pointers and bytes.
func (g *group) where(p placement, r int) (in, out backend.DevicePtr, inB, outB []byte) {
	switch p {
	case outOfPlace:
		return g.in[r], g.out[r], g.inBytes[r], g.outBytes[r]
	case inPlace:
		return g.in[r], g.in[r], g.inBytes[r], g.inBytes[r]
	case fromBuffer:
		return g.bufs[r], g.out[r], g.bufBytes[r], g.outBytes[r]
	}
	return g.bufs[r], g.bufs[r], g.bufBytes[r], g.bufBytes[r]
}

// algoCase is an algorithm on a world size.
type algoCase struct {
	algo  kernels.Algo
	world int
}

func algoCases() []algoCase {
	return []algoCase{
		{kernels.OneShot, 2}, {kernels.OneShot, 4}, {kernels.OneShot, 8},
		{kernels.TwoShot, 2}, {kernels.TwoShot, 4}, {kernels.TwoShot, 8},
		{kernels.HCM, 8},
		{kernels.Pipeline, 2}, {kernels.Pipeline, 3}, {kernels.Pipeline, 8},
	}
}

// capacity is the largest count algo reduces with the group's buffer.
func (g *group) capacity(algo kernels.Algo, d backend.DType) int {
	if algo == kernels.HCM {
		return kernels.HCMPartialOffset(g.bufSize) / d.Size()
	}
	return g.bufSize / d.Size()
}

func testBufSize() int {
	if race.Enabled {
		return 72 << 10 // still holds 4099 float64 in half a buffer
	}
	return 128 << 10
}

// backToBack is how many times each case runs back to back: 20, or fewer
// under the race detector (which slows the reduction tenfold) so that the
// package's tests stay within half a minute on two cores.
func backToBack(count int) int {
	switch {
	case !race.Enabled:
		return 20
	case count > 1000:
		return 2
	}
	return 4
}

// seeds alternate between back-to-back calls so stale data shows.
const numSeeds = 3

// patterns holds every rank's input for each seed and the expected
// outputs, computed the first time a seed and op are asked for (under the
// race detector an expected result costs about as much as a call). Both
// hold the first period elements; an input or result of count elements
// repeats them (tiledPatterns) or is exactly them (makePatterns, period ==
// count). Tests write inputs into their buffers and compare results period
// by period, so that megabyte messages cost no megabyte patterns.
type patterns struct {
	d            backend.DType
	world, count int
	period       int
	inputs       [numSeeds][][]byte
	expected     map[[2]int][]byte // by seed and op
}

func makePatterns(d backend.DType, world, count int) *patterns {
	p := &patterns{d: d, world: world, count: count, period: count, expected: map[[2]int][]byte{}}
	for s := range numSeeds {
		p.inputs[s] = make([][]byte, world)
		for r := range world {
			p.inputs[s][r] = make([]byte, count*d.Size())
			numeric.Pattern(d, p.inputs[s][r], count, r, s+1)
		}
	}
	return p
}

// want is the expected result of op over every rank's input of seed: its
// first period elements.
func (p *patterns) want(seed int, op backend.ReduceOp) []byte {
	k := [2]int{seed, int(op)}
	if b, ok := p.expected[k]; ok {
		return b
	}
	b := make([]byte, p.period*p.d.Size())
	numeric.Expected(p.d, op, b, p.period, p.world, seed+1)
	p.expected[k] = b
	return b
}

// wantN is the first n bytes of the expected result of op over seed.
func (p *patterns) wantN(seed int, op backend.ReduceOp, n int) []byte {
	return tiled(p.want(seed, op), n)
}

// input is the first n bytes of rank r's input for seed.
func (p *patterns) input(seed, r, n int) []byte { return tiled(p.inputs[seed][r], n) }

// fillInput writes the first len(dst) bytes of rank r's input for seed
// into dst.
func (p *patterns) fillInput(dst []byte, seed, r int) { fillTiled(dst, p.inputs[seed][r]) }

// fillTiled fills dst with period repeated, the last copy cut short.
func fillTiled(dst, period []byte) { numeric.Repeat(dst, copy(dst, period)) }

// tiled is the first n bytes of period repeated: period itself when it is
// long enough.
func tiled(period []byte, n int) []byte {
	if n <= len(period) {
		return period[:n]
	}
	b := make([]byte, n)
	fillTiled(b, period)
	return b
}

// equalTiled reports whether got is period repeated, the last copy cut
// short.
func equalTiled(got, period []byte) bool {
	if len(period) == 0 {
		return len(got) == 0
	}
	for off := 0; off < len(got); off += len(period) {
		end := min(off+len(period), len(got))
		if !bytes.Equal(got[off:end], period[:end-off]) {
			return false
		}
	}
	return true
}

// launchAll runs the all-reduce kernel on every rank of g.
func (g *group) launchAll(t *testing.T, algo kernels.Algo, d backend.DType,
	argsOf func(r int) kernels.AllReduceArgs) map[int]error {
	t.Helper()
	fn := AllReduce(algo, d)
	ctx := testCtx(t)
	return runRanks(allRanks(g.world), func(r int) error {
		a := argsOf(r)
		if algo == kernels.HCM {
			a.Extra = hcmExtra(r)
		}
		return fn(ctx, g.mem, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(256)}, a.Args())
	})
}

const guard = 0xa5

// TestAllReduceExact checks every algorithm × world × dtype × op × size ×
// placement against the exact expected result, repeating each case back to
// back with alternating inputs on pads that are never reset.
func TestAllReduceExact(t *testing.T) {
	bufSize := testBufSize()
	for _, ac := range algoCases() {
		t.Run(fmt.Sprintf("%s/world%d", ac.algo, ac.world), func(t *testing.T) {
			g := newGroup(ac.world, bufSize)
			for _, d := range backend.DTypes {
				full := g.capacity(ac.algo, d)
				pat := makePatterns(d, ac.world, full)
				for _, count := range []int{1, 3, 7, 8, 15, 16, 17, 1000, 4099, full} {
					reps := backToBack(count)
					for _, op := range ops {
						for _, pl := range placements {
							what := fmt.Sprintf("%v %v count %d %v", d, op, count, pl)
							for rep := range reps {
								g.checkOnce(t, ac.algo, d, op, count, pl, pat, rep%numSeeds, what)
							}
						}
					}
				}
			}
		})
	}
}

func (g *group) checkOnce(t *testing.T, algo kernels.Algo, d backend.DType, op backend.ReduceOp,
	count int, pl placement, pat *patterns, seed int, what string) {
	t.Helper()
	n := count * d.Size()
	outs := make([][]byte, g.world)
	for r := range g.world {
		_, _, inB, outB := g.where(pl, r)
		pat.fillInput(inB[:n], seed, r)
		if pl != inBuffer && n+16 <= len(outB) && &outB[0] != &inB[0] {
			for i := n; i < n+16; i++ {
				outB[i] = guard
			}
		}
		outs[r] = outB
	}
	errs := g.launchAll(t, algo, d, func(r int) kernels.AllReduceArgs {
		in, out, _, _ := g.where(pl, r)
		return g.allReduceArgs(r, in, out, count, d, op)
	})
	g.requireClean(t, errs, what)
	want := pat.want(seed, op)
	for r := range g.world {
		if !equalTiled(outs[r][:n], want) {
			wrong, first := numeric.Compare(d, outs[r], tiled(want, n), count)
			require.Failf(t, "wrong result", "%s seed %d rank %d: %d wrong, first %v", what, seed, r, wrong, first)
		}
		if pl == outOfPlace {
			require.True(t, equalTiled(g.inBytes[r][:n], pat.inputs[seed][r]), "%s: rank %d input changed", what, r)
			if n+16 <= len(outs[r]) {
				require.Equal(t, bytes.Repeat([]byte{guard}, 16), outs[r][n:n+16], "%s: rank %d wrote past the output", what, r)
			}
		}
	}
}

// TestAllReduceMatchesReference reduces random, inexact values and checks
// the ABI's arithmetic bit for bit: ascending rank order, float16 and
// bfloat16 accumulated in float32 and rounded once (HCM: once per quad
// partial, then once more), int32 wrapping.
func TestAllReduceMatchesReference(t *testing.T) {
	bufSize := testBufSize()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ac := range algoCases() {
		g := newGroup(ac.world, bufSize)
		for _, d := range backend.DTypes {
			for _, op := range ops {
				count := min(3001, g.capacity(ac.algo, d))
				n := count * d.Size()
				for r := range g.world {
					for i := range count {
						v := rng.NormFloat64() * math.Ldexp(1, rng.IntN(20)-10)
						if d == backend.Int32 {
							v = float64(int32(rng.Uint32()))
						}
						numeric.Put(d, g.inBytes[r], i, v)
					}
				}
				errs := g.launchAll(t, ac.algo, d, func(r int) kernels.AllReduceArgs {
					return g.allReduceArgs(r, g.in[r], g.out[r], count, d, op)
				})
				what := fmt.Sprintf("%s world %d %v %v", ac.algo, ac.world, d, op)
				g.requireClean(t, errs, what)
				want := make([]byte, n)
				for i := range count {
					numeric.Put(d, want, i, reference(ac.algo, d, op, g.inBytes, i))
				}
				for r := range g.world {
					wrong, first := numeric.Compare(d, g.outBytes[r], want, count)
					require.Zero(t, wrong, "%s rank %d: first %v", what, r, first)
				}
			}
		}
	}
}

// reference is element i of the all-reduce of ins as the ABI defines it,
// already rounded to d.
func reference(algo kernels.Algo, d backend.DType, op backend.ReduceOp, ins [][]byte, i int) float64 {
	if algo == kernels.HCM {
		lo := reduceRanks(d, op, ins, i, []int{0, 1, 2, 3})
		hi := reduceRanks(d, op, ins, i, []int{4, 5, 6, 7})
		return combineAs(d, op, []float64{lo, hi})
	}
	return reduceRanks(d, op, ins, i, allRanks(len(ins)))
}

func reduceRanks(d backend.DType, op backend.ReduceOp, ins [][]byte, i int, ranks []int) float64 {
	vals := make([]float64, len(ranks))
	for k, r := range ranks {
		vals[k] = numeric.Get(d, ins[r], i)
	}
	return combineAs(d, op, vals)
}

// combineAs reduces vals in order in d's accumulator type and rounds the
// result to d.
func combineAs(d backend.DType, op backend.ReduceOp, vals []float64) float64 {
	var v float64
	switch d {
	case backend.Float64:
		acc := []float64{vals[0]}
		for _, x := range vals[1:] {
			numeric.Accumulate(op, acc, []float64{x})
		}
		v = acc[0]
	case backend.Int32:
		acc := []int32{int32(vals[0])}
		for _, x := range vals[1:] {
			numeric.Accumulate(op, acc, []int32{int32(x)})
		}
		v = float64(acc[0])
	default:
		acc := []float32{float32(vals[0])}
		for _, x := range vals[1:] {
			numeric.Accumulate(op, acc, []float32{float32(x)})
		}
		v = float64(acc[0])
	}
	b := make([]byte, d.Size())
	numeric.Put(d, b, 0, v)
	return numeric.Get(d, b, 0)
}

// TestAllReducePartialOffsetInExtra places HCM partials where the ABI
// text puts them, HCMPartialOffset(bufferSize), when the caller passes that
// offset in Extra's upper half.
func TestAllReducePartialOffsetInExtra(t *testing.T) {
	g := newGroup(8, testBufSize())
	d := backend.BFloat16
	count := g.capacity(kernels.HCM, d)
	pat := makePatterns(d, g.world, count)
	for r := range g.world {
		copy(g.inBytes[r], pat.inputs[1][r])
	}
	fn := AllReduce(kernels.HCM, d)
	ctx := testCtx(t)
	errs := runRanks(allRanks(8), func(r int) error {
		a := g.allReduceArgs(r, g.in[r], g.in[r], count, d, backend.Max)
		a.Extra = hcmExtra(r) | uint64(kernels.HCMPartialOffset(g.bufSize))<<32
		return fn(ctx, g.mem, backend.LaunchConfig{}, a.Args())
	})
	g.requireClean(t, errs, "hcm with partial offset")
	for r := range g.world {
		require.Equal(t, pat.want(1, backend.Max), g.inBytes[r][:count*d.Size()], "rank %d", r)
	}
}

// TestAllReduceZeroCount still synchronises and writes nothing.
func TestAllReduceZeroCount(t *testing.T) {
	g := newGroup(2, 4096)
	g.outBytes[0][0], g.outBytes[1][0] = guard, guard
	errs := g.launchAll(t, kernels.TwoShot, backend.Float32, func(r int) kernels.AllReduceArgs {
		return g.allReduceArgs(r, g.in[r], g.out[r], 0, backend.Float32, backend.Sum)
	})
	g.requireClean(t, errs, "zero count")
	require.Equal(t, byte(guard), g.outBytes[0][0])
	require.Equal(t, byte(guard), g.outBytes[1][0])
}

// TestAllReduceOneShotPaths runs the one-shot across the bounds between its
// LL, push (one and two rounds) and classic paths (the Go kernels' LL
// bound and the device kernels'), back to back on pads
// that are never reset, and checks that the epoch counted exactly the LL
// and push calls.
func TestAllReduceOneShotPaths(t *testing.T) {
	d := backend.Float32
	for _, world := range []int{2, 4} {
		llMax, pushMax := kernels.OneShotLLMax(world), kernels.OneShotPushMax(world)
		counts := []int{cpuLLMax / 4, cpuLLMax/4 + 1, llMax / 4, llMax/4 + 1, kernels.PushSplitBytes/4 + 3}
		if world == 4 {
			counts = append(counts, pushMax/4+5)
		}
		top := slices.Max(counts)
		g := newGroup(world, top*d.Size())
		pat := makePatterns(d, world, top)
		epochs := 0
		for rep := range 2 {
			for i, count := range counts {
				if rep == 1 {
					count = counts[len(counts)-1-i]
				}
				path := oneShotPath(count*d.Size(), world)
				if path != "classic" {
					epochs++
				}
				what := fmt.Sprintf("world %d count %d (%s path)", world, count, path)
				g.checkOnce(t, kernels.OneShot, d, backend.Sum, count, outOfPlace, pat, (rep+i)%numSeeds, what)
			}
		}
		for r := range world {
			got := binary.LittleEndian.Uint32(g.padBytes[r][kernels.EpochWord:])
			require.Equal(t, uint32(epochs), got, "world %d rank %d: epoch", world, r)
		}
	}
}

// TestAllReduceOneShotFreeRunning runs a sequence of one-shot calls that
// mixes the LL path, the push path and the push path over
// PushSplitBytes (which keeps to slot 0 between barriers,
// launch.openPush), each rank making its calls without waiting for the
// others, every call with its own input and output; then checks every
// output exactly and the epoch. Under the race detector a call that
// writes a slot before a peer has read it fails.
func TestAllReduceOneShotFreeRunning(t *testing.T) {
	d := backend.Float32
	for _, world := range []int{2, 3} {
		// top is the largest push call that is not large; after a large
		// call it writes where that call's second part lay.
		ll, push, top, large := cpuLLMax/4, kernels.OneShotLLMax(world)/4+1, kernels.PushSplitBytes/4, kernels.PushSplitBytes/4+3
		counts := []int{push, large, top, large, ll, large, push, top}
		g := newGroup(world, 4*large) // the kernels map count's bytes of every buffer
		value := func(c, r, i int) float32 { return float32((r+1)*(i%1000) + c) }
		type buffers struct{ in, out backend.DevicePtr }
		bufs := make([][]buffers, len(counts)) // by call, rank
		outs := make([][][]byte, len(counts))
		for c, count := range counts {
			require.NotEqual(t, "classic", oneShotPath(4*count, world))
			for r := range world {
				in, inB := g.mem.alloc(4 * count)
				for i := range count {
					binary.LittleEndian.PutUint32(inB[4*i:], math.Float32bits(value(c, r, i)))
				}
				out, outB := g.mem.alloc(4 * count)
				bufs[c] = append(bufs[c], buffers{in, out})
				outs[c] = append(outs[c], outB)
			}
		}
		fn := AllReduce(kernels.OneShot, d)
		errs := runRanks(allRanks(world), func(r int) error {
			for c, count := range counts {
				a := g.allReduceArgs(r, bufs[c][r].in, bufs[c][r].out, count, d, backend.Sum)
				if err := fn(testCtx(t), g.mem, backend.LaunchConfig{}, a.Args()); err != nil {
					return fmt.Errorf("call %d: %w", c, err)
				}
			}
			return nil
		})
		g.requireClean(t, errs, fmt.Sprintf("world %d", world))
		for c, count := range counts {
			want := make([]byte, 4*count)
			for i := range count {
				var sum float32
				for r := range world {
					sum += value(c, r, i)
				}
				binary.LittleEndian.PutUint32(want[4*i:], math.Float32bits(sum))
			}
			for r := range world {
				require.Equal(t, want, outs[c][r], "world %d call %d (count %d) rank %d", world, c, count, r)
			}
		}
		for r := range world {
			got := binary.LittleEndian.Uint32(g.padBytes[r][kernels.EpochWord:])
			require.Equal(t, uint32(len(counts)), got, "world %d rank %d: epoch", world, r)
		}
	}
}
