package cpu

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// call is one rank's side of an all-reduce launch in the agreement tests.
type call struct {
	algo  kernels.Algo
	dtype backend.DType
	op    backend.ReduceOp
	count int
	seq   uint32
}

// runCalls runs one all-reduce on every rank of world, rank r making call
// callOf(r) from its input to its output, and returns each rank's error.
func (g *group) runCalls(ctx context.Context, world int, callOf func(r int) call) map[int]error {
	return runRanks(allRanks(world), func(r int) error {
		c := callOf(r)
		a := g.allReduceArgs(r, g.in[r], g.out[r], c.count, c.dtype, c.op)
		a.Call = kernels.CallTag(c.seq, c.algo, uint64(c.count), c.dtype, c.op)
		return AllReduce(c.algo, c.dtype)(ctx, g.mem, backend.LaunchConfig{}, a.Args())
	})
}

// with is c changed by f.
func (c call) with(f func(*call)) call {
	f(&c)
	return c
}

// callCase is a table row of the call agreement tests: the calls of a
// world's ranks and whether they agree.
type callCase struct {
	name  string
	world int
	calls map[int]call // ranks not listed make base
	match bool
}

// callsOf is the call of every rank: calls[r], else base.
func callsOf(base call, calls map[int]call) func(r int) call {
	return func(r int) call {
		if c, ok := calls[r]; ok {
			return c
		}
		return base
	}
}

// requireMismatch requires rank r's launch, which made call c, to have
// returned err == nil with a mismatch naming another rank in its status
// word and the record of c in its pad; it returns the status's channel.
func (g *group) requireMismatch(t *testing.T, err error, r int, c call) int {
	t.Helper()
	require.NoError(t, err, "rank %d", r)
	code, peer, ch := kernels.DecodeStatus(g.statusOf(r))
	require.Equal(t, kernels.StatusMismatch, code, "rank %d: status code", r)
	require.NotEqual(t, r, peer, "rank %d names itself", r)
	// Every rank left the record of its own call.
	rec := kernels.DecodeRecord(g.padBytes[r][kernels.RecordOffset:])
	require.Equal(t, kernels.CallTag(c.seq, c.algo, uint64(c.count), c.dtype, c.op), rec.Call, "rank %d record", r)
	require.Equal(t, uint64(c.count), rec.Count)
	require.Equal(t, c.algo, rec.Algo())
	require.Equal(t, c.dtype, rec.DType())
	require.Equal(t, c.op, rec.Op())
	return ch
}

func TestCallAgreement(t *testing.T) {
	base := call{algo: kernels.OneShot, dtype: backend.BFloat16, op: backend.Sum, count: 64, seq: 7}
	pushCount := kernels.OneShotLLMax(2)/2 + 64 // bf16 elements on the push path at world 2
	cases := []callCase{
		{"same calls", 2, nil, true},
		{"same calls two-shot", 4, map[int]call{0: base.with(func(c *call) { c.algo = kernels.TwoShot }),
			1: base.with(func(c *call) { c.algo = kernels.TwoShot }), 2: base.with(func(c *call) { c.algo = kernels.TwoShot }),
			3: base.with(func(c *call) { c.algo = kernels.TwoShot })}, true},
		{"count on the LL path", 2, map[int]call{1: base.with(func(c *call) { c.count = 128 })}, false},
		{"op on the LL path", 2, map[int]call{1: base.with(func(c *call) { c.op = backend.Max })}, false},
		{"dtype", 2, map[int]call{1: base.with(func(c *call) { c.dtype = backend.Float32; c.count = 32 })}, false},
		{"skipped call on the LL path", 2, map[int]call{1: base.with(func(c *call) { c.seq = 8 })}, false},
		{"one-shot LL against two-shot", 2, map[int]call{1: base.with(func(c *call) { c.algo = kernels.TwoShot })}, false},
		{"LL against push", 2, map[int]call{0: base.with(func(c *call) { c.count = pushCount })}, false},
		{"skipped two-shot call", 2, map[int]call{
			0: base.with(func(c *call) { c.algo = kernels.TwoShot; c.count = 4096 }),
			1: base.with(func(c *call) { c.algo = kernels.TwoShot; c.count = 4096; c.seq = 8 })}, false},
		{"classic one-shot count", 2, map[int]call{
			0: base.with(func(c *call) { c.count = 300000 }), 1: base.with(func(c *call) { c.count = 300016 })}, false},
		{"one of four differs", 4, map[int]call{2: base.with(func(c *call) { c.op = backend.Min })}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			g := newGroup(tc.world, 1<<20)
			callOf := callsOf(base, tc.calls)
			errs := g.runCalls(ctx, tc.world, callOf)
			if tc.match {
				g.requireClean(t, errs, tc.name)
				return
			}
			for r := range tc.world {
				g.requireMismatch(t, errs[r], r, callOf(r))
			}
		})
	}
}

// TestCallAgreementOff: a Call of 0 turns the check off, so kernels driven
// directly by tools keep working without a sequence number.
func TestCallAgreementOff(t *testing.T) {
	ctx := testCtx(t)
	g := newGroup(2, 1<<16)
	errs := runRanks(allRanks(2), func(r int) error {
		a := g.allReduceArgs(r, g.in[r], g.out[r], 64, backend.Float32, backend.Sum)
		return AllReduce(kernels.TwoShot, backend.Float32)(ctx, g.mem, backend.LaunchConfig{}, a.Args())
	})
	g.requireClean(t, errs, "call 0")
	require.Zero(t, binary.LittleEndian.Uint64(g.padBytes[0][kernels.RecordOffset:]), "no record without a Call")
}

// TestMismatchedSkippedCallTimesOut: a rank that is a call ahead on
// another path is not seen by the device check (neither side signals the
// other); the deadline ends the wait, and the host's records tell.
func TestMismatchedSkippedCallTimesOut(t *testing.T) {
	ctx := testCtx(t)
	g := newGroup(2, 1<<20)
	errs := runRanks(allRanks(2), func(r int) error {
		algo, count, seq := kernels.OneShot, 64, uint32(3)
		if r == 1 {
			algo, count, seq = kernels.TwoShot, 4096, 4
		}
		a := g.allReduceArgs(r, g.in[r], g.out[r], count, backend.Float32, backend.Sum)
		a.TimeoutNs = uint64(200 * time.Millisecond)
		a.Call = kernels.CallTag(seq, algo, uint64(count), backend.Float32, backend.Sum)
		return AllReduce(algo, backend.Float32)(ctx, g.mem, backend.LaunchConfig{}, a.Args())
	})
	for r := range 2 {
		require.NoError(t, errs[r])
		code, peer, _ := kernels.DecodeStatus(g.statusOf(r))
		require.Equal(t, kernels.StatusTimeout, code, "rank %d", r)
		require.Equal(t, 1-r, peer)
		rec := kernels.DecodeRecord(g.padBytes[1-r][kernels.RecordOffset:])
		require.Equal(t, uint32(3+(1-r)), rec.Seq(), "rank %d's record", 1-r)
	}
}
