package collective_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/numeric"
)

// TestAverage: an average (backend.Avg) on three ranks, where the division
// by the world rounds (and int32 truncates toward zero), on every path of
// the all-reduce and of the reduce-scatter, exactly as numeric.Expected
// has it.
func TestAverage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := fake.New(fake.WithDevices(3))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	comms, errs := rendezvousDevices(t, ctx, b, []int{0, 1, 2})
	require.NoError(t, errors.Join(errs...))
	each := func(f func(c *collective.Comm) error) error {
		errs := make([]error, len(comms))
		var wg sync.WaitGroup
		for r, c := range comms {
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = f(c) }()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	for _, d := range []backend.DType{backend.Float32, backend.BFloat16, backend.Int32} {
		for _, algo := range []collective.Algo{collective.OneShot, collective.TwoShot, collective.Pipeline, collective.None} {
			require.NoError(t, each(func(c *collective.Comm) error { return reduceCheck(ctx, c, d, backend.Avg, algo, 1001, 3) }))
		}
		for _, algo := range []collective.Algo{collective.Direct, collective.Pipeline, collective.None} {
			require.NoError(t, each(func(c *collective.Comm) error { return reduceScatterAvg(ctx, c, d, algo, 333, 5) }))
		}
	}
}

// reduceScatterAvg reduce-scatters count elements a rank of pattern data
// with Avg, out of place, and checks the rank's block exactly.
func reduceScatterAvg(ctx context.Context, c *collective.Comm, d backend.DType, algo collective.Algo, count, seed int) error {
	dev := c.Device()
	world, size := c.World(), d.Size()
	in, err := dev.Alloc(ctx, world*count*size)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dev.Alloc(ctx, count*size)
	if err != nil {
		return err
	}
	defer out.Close()
	host := make([]byte, world*count*size)
	numeric.Pattern(d, host, world*count, c.Rank(), seed)
	if err := dev.CopyToDevice(ctx, in.Ptr(), host); err != nil {
		return err
	}
	s, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	w, err := c.ReduceScatter(ctx, s, in.Ptr(), out.Ptr(), count, d, backend.Avg, algo)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Synchronize(ctx); err != nil {
		return err
	}
	got := make([]byte, count*size)
	if err := dev.CopyFromDevice(ctx, got, out.Ptr()); err != nil {
		return err
	}
	all := make([]byte, world*count*size)
	numeric.Expected(d, backend.Avg, all, world*count, world, seed)
	want := all[c.Rank()*count*size : (c.Rank()+1)*count*size]
	if wrong, first := numeric.Compare(d, got, want, count); wrong > 0 {
		return fmt.Errorf("rank %d: reduce-scatter %v %v avg: %d of %d wrong, first %v", c.Rank(), algo, d, wrong, count, first)
	}
	return nil
}

// TestAverageAgainstSum: ranks that average and ranks that sum make
// different calls; the call agreement fails every rank, naming its peer,
// rather than returning a sum on one rank and an average on the other.
func TestAverageAgainstSum(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms := fakePair(t, ctx, 64<<10, 10*time.Second)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := []backend.ReduceOp{backend.Avg, backend.Sum}[r]
			errs[r] = reduceCheck(ctx, c, backend.Float32, op, collective.TwoShot, 1000, 9)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.ErrorIs(t, err, collective.ErrMismatch, "rank %d", r)
		require.ErrorContains(t, err, fmt.Sprintf("rank %d", 1-r), "rank %d", r)
	}
}
