package collective_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

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
