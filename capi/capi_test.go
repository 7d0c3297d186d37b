package capi_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/capi"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/numeric"
)

// group makes world comms from one unique id, ranks as goroutines.
func group(t *testing.T, world int, cfg capi.Config) []*capi.Comm {
	t.Helper()
	id, err := capi.NewUniqueID()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms := make([]*capi.Comm, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { comms[r], errs[r] = capi.InitRank(ctx, id, r, world, cfg) })
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		t.Cleanup(func() { require.NoError(t, comms[r].Destroy()) })
	}
	return comms
}

// TestCollectives runs every collective through capi on the fake backend,
// in place and out of place, and checks every element against the
// reference.
func TestCollectives(t *testing.T) {
	const world = 3
	comms := group(t, world, capi.Config{Backend: "fake", Device: -1, Timeout: 20 * time.Second})
	ctx := context.Background()
	const count = 1000 // elements per rank: not a multiple of anything
	for _, op := range collective.Ops {
		for _, inPlace := range []bool{false, true} {
			t.Run(op.String()+map[bool]string{false: "/out", true: "/in"}[inPlace], func(t *testing.T) {
				var wg sync.WaitGroup
				for r, c := range comms {
					wg.Go(func() { runOne(t, ctx, c, op, r, world, count, inPlace) })
				}
				wg.Wait()
			})
		}
	}
}

func runOne(t *testing.T, ctx context.Context, c *capi.Comm, op collective.Op, rank, world, count int, inPlace bool) {
	d := backend.Float32
	inN, outN := op.Elements(count, world)
	size := d.Size()
	dev := c.Collective().Device()
	buf, err := c.Alloc(ctx, max(inN, outN)*size)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Free(buf)) }()
	out, err := c.Alloc(ctx, outN*size)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Free(out)) }()
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.DestroyStream(s)) }()

	send, recv := buf, out
	if inPlace {
		send, recv = buf, buf
		switch op {
		case collective.OpReduceScatter:
			recv = buf + uintptr(rank*count*size)
		case collective.OpAllGather:
			send = buf + uintptr(rank*count*size)
		}
	}
	in := make([]byte, inN*size)
	numeric.Pattern(d, in, inN, rank, 7)
	require.NoError(t, dev.CopyToDevice(ctx, backend.DevicePtr(send), in))
	call := capi.Call{Op: op, Send: send, Recv: recv, Count: uint64(count), DType: d, Red: backend.Sum, Root: 1, Stream: s}
	require.NoError(t, c.Do(ctx, call))
	require.NoError(t, c.SyncStream(ctx, s))
	got := make([]byte, outN*size)
	require.NoError(t, dev.CopyFromDevice(ctx, got, backend.DevicePtr(recv)))
	want := make([]byte, len(got))
	pattern := func(r, j int) float64 { return numeric.PatternValue(r, 7, j) }
	fold := func(a, b float64) float64 { return numeric.Combine(backend.Sum, a, b) }
	numeric.EncodeFunc(d, want, outN, func(i int) float64 { return op.Reference(pattern, fold, world, rank, 1, count, i) })
	wrong, first := numeric.Compare(d, got, want, outN)
	require.Zero(t, wrong, "rank %d: first mismatch %+v", rank, first)
}

// rankZero forms a group of two with the comm timeout and returns rank 0's
// comm, a stream of it and 4 KiB of its device memory.
func rankZero(t *testing.T, timeout time.Duration) (c *capi.Comm, stream, buf uintptr) {
	t.Helper()
	c = group(t, 2, capi.Config{Backend: "fake", Device: -1, Timeout: timeout})[0]
	ctx := context.Background()
	stream, err := c.NewStream(ctx)
	require.NoError(t, err)
	buf, err = c.Alloc(ctx, 4096)
	require.NoError(t, err)
	return c, stream, buf
}

// TestBadArguments: every argument a caller can get wrong is an
// InvalidArgument result naming it, never a launch.
func TestBadArguments(t *testing.T) {
	c, s, buf := rankZero(t, 5*time.Second)
	ctx := context.Background()
	ok := capi.Call{Op: collective.OpAllReduce, Send: buf, Recv: buf, Count: 16, DType: backend.Float32, Stream: s}
	for _, tc := range []struct {
		name string
		edit func(*capi.Call)
		want string
	}{
		{"unknown op", func(c *capi.Call) { c.Op = 9 }, "unknown collective"},
		{"dtype", func(c *capi.Call) { c.DType = 77 }, "datatype 77"},
		{"reduce op", func(c *capi.Call) { c.Red = 9 }, "reduction op 9"},
		{"count past int", func(c *capi.Call) { c.Count = math.MaxUint64 }, "does not fit an int"},
		{"count overflows bytes", func(c *capi.Call) { c.Count = 1 << 62 }, "too large"},
		{"count past the allocation", func(c *capi.Call) { c.Count = 4096 }, "in-place buffer of 16384 bytes"},
		{"null recvbuff", func(c *capi.Call) { c.Recv = 0 }, "recvbuff is NULL"},
		{"null sendbuff", func(c *capi.Call) { c.Send = 0 }, "sendbuff is NULL"},
		{"root", func(c *capi.Call) { c.Op, c.Root = collective.OpBroadcast, 2 }, "root 2 out of range"},
		{"unknown stream", func(c *capi.Call) { c.Stream = 12345 }, "intranodeStreamCreate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := ok
			tc.edit(&call)
			err := c.Do(ctx, call)
			require.Equal(t, capi.InvalidArgument, capi.ResultOf(err), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.NoError(t, c.Do(ctx, capi.Call{Op: collective.OpAllReduce, Send: buf, Recv: buf, Count: 0, DType: backend.Float32, Stream: s}),
		"a call of count 0 does nothing, as NCCL's")
	require.Equal(t, capi.InvalidArgument, capi.ResultOf(c.Free(buf+8)))
	require.Equal(t, capi.InvalidArgument, capi.ResultOf(c.DestroyStream(s+1)))

	_, err := capi.InitRank(ctx, capi.UniqueID{}, 0, 2, capi.Config{Backend: "fake"})
	require.Equal(t, capi.InvalidArgument, capi.ResultOf(err))
	require.ErrorContains(t, err, "not a unique id")
	id, err := capi.NewUniqueID()
	require.NoError(t, err)
	_, err = capi.InitRank(ctx, id, 2, 2, capi.Config{Backend: "fake"})
	require.Equal(t, capi.InvalidArgument, capi.ResultOf(err))
}

// TestDeadPeer: a rank that stops calling makes the survivor's call fail
// within the timeout, reported by the stream sync and by AsyncError, naming
// the rank; after Destroy the comm refuses calls.
func TestDeadPeer(t *testing.T) {
	c, s, buf := rankZero(t, 500*time.Millisecond)
	ctx := context.Background()
	call := capi.Call{Op: collective.OpAllReduce, Send: buf, Recv: buf, Count: 64, DType: backend.Float32, Stream: s}
	start := time.Now()
	require.NoError(t, c.Do(ctx, call))
	err := c.SyncStream(ctx, s)
	require.Less(t, time.Since(start), 3*time.Second)
	require.Error(t, err)
	require.Equal(t, capi.Timeout, capi.ResultOf(err), "%v", err)
	require.ErrorContains(t, err, "rank 1")
	require.Error(t, c.AsyncError())
	require.ErrorContains(t, c.Do(ctx, call), "failed earlier")
	require.NoError(t, c.Destroy())
	require.Equal(t, capi.Closed, capi.ResultOf(c.Do(ctx, call)))
	require.NoError(t, c.Destroy(), "a second destroy does nothing")
}
