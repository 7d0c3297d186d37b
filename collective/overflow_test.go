package collective_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

// Counts whose byte size overflows an int are invalid arguments wherever a
// count meets a byte size: a view of the symmetric buffer, every
// collective's argument check, the selection. None becomes a view or a
// launch. (GetBuffer(0, 1<<62, bfloat16, 0) once returned a view of 2^62
// elements of a 64 KiB buffer: 1<<62 * 2 wraps to a small size.)
func TestOverflowingCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comms := fakePair(t, ctx, 64<<10, 5*time.Second)
	c := comms[0]
	counts := []int{1 << 62, math.MaxInt, math.MaxInt/2 + 1, math.MaxInt / 8, 1<<61 + 1}

	t.Run("GetBuffer", func(t *testing.T) {
		for _, n := range counts {
			for _, dt := range backend.DTypes {
				v, err := c.GetBuffer(0, n, dt, 0)
				require.ErrorIs(t, err, backend.ErrInvalidArgument, "count %d of %v", n, dt)
				require.Zero(t, v.Count)
			}
		}
		_, err := c.GetBuffer(0, 1, backend.BFloat16, math.MaxInt-1)
		require.ErrorIs(t, err, backend.ErrInvalidArgument, "an offset near MaxInt")
		v, err := c.GetBuffer(1, 32<<10, backend.BFloat16, 0)
		require.NoError(t, err, "the whole buffer is a valid view")
		require.Equal(t, 64<<10, v.Bytes())
	})

	s, err := c.Device().NewStream(ctx)
	require.NoError(t, err)
	defer s.Close()
	buf, err := c.Device().Alloc(ctx, 4<<10)
	require.NoError(t, err)
	defer buf.Close()
	out, err := c.Device().Alloc(ctx, 4<<10)
	require.NoError(t, err)
	defer out.Close()
	p, q := buf.Ptr(), out.Ptr()
	calls := map[string]func(n int, dt backend.DType, algo collective.Algo) error{
		"all-reduce": func(n int, dt backend.DType, algo collective.Algo) error {
			_, err := c.AllReduce(ctx, s, p, n, dt, backend.Sum, algo)
			return err
		},
		"reduce-scatter": func(n int, dt backend.DType, algo collective.Algo) error {
			_, err := c.ReduceScatter(ctx, s, p, q, n, dt, backend.Sum, algo)
			return err
		},
		"all-gather": func(n int, dt backend.DType, algo collective.Algo) error {
			_, err := c.AllGather(ctx, s, p, q, n, dt, algo)
			return err
		},
		"broadcast": func(n int, dt backend.DType, algo collective.Algo) error {
			_, err := c.Broadcast(ctx, s, p, n, dt, 0, algo)
			return err
		},
		"all-to-all": func(n int, dt backend.DType, algo collective.Algo) error {
			_, err := c.AllToAll(ctx, s, p, q, n, dt, algo)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			algos := []collective.Algo{collective.None, collective.Direct, collective.Pipeline}
			if name == "all-reduce" {
				algos = []collective.Algo{collective.None, collective.OneShot, collective.TwoShot, collective.Pipeline}
			}
			for _, n := range counts {
				for _, dt := range backend.DTypes {
					for _, algo := range algos {
						err := call(n, dt, algo)
						require.ErrorIs(t, err, backend.ErrInvalidArgument, "count %d of %v, %v", n, dt, algo)
					}
				}
			}
		})
	}
	t.Run("selection", func(t *testing.T) {
		for _, n := range counts {
			for _, op := range []collective.Op{collective.OpAllReduce, collective.OpReduceScatter,
				collective.OpAllGather, collective.OpBroadcast, collective.OpAllToAll} {
				require.Equal(t, collective.None, c.SelectAlgo(op, n, backend.BFloat16), "%v of %d", op, n)
			}
		}
	})
}
