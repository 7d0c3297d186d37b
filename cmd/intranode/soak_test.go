package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSoakFaultAt holds the fault inside the time the job's ranks make
// calls: a fault drawn after the last job's ranks had stopped blamed the
// survivors for not failing (CI, 2026-11-26: "rank 1 survived a kill of
// rank 0 without an error", the fault at 4.2 s with less than that left).
func TestSoakFaultAt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		job, left time.Duration
		lo, hi    time.Duration // the draw lies in [lo, hi)
	}{
		{"plenty left", 5 * time.Second, time.Minute, time.Second, 5 * time.Second},
		{"last job", 5 * time.Second, 2 * time.Second, 400 * time.Millisecond, 2 * time.Second},
		{"nothing left", 5 * time.Second, 0, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for range 1000 {
				d := soakFaultAt(rng, tc.job, tc.left)
				require.GreaterOrEqual(t, d, tc.lo)
				require.Less(t, d, tc.hi)
			}
		})
	}
}

// TestReleasedWaitsForGoroutines: the reading after a rank has closed
// everything waits for goroutines that are still ending.
func TestReleasedWaitsForGoroutines(t *testing.T) {
	before := readResources()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-stop
		time.Sleep(50 * time.Millisecond)
	}()
	require.Greater(t, readResources().Goroutines, before.Goroutines)
	close(stop)
	after := released(before)
	<-done
	require.LessOrEqual(t, after.Goroutines, before.Goroutines)
}
