package main

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
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

// TestGainedNamesWhatLeaked: the leak report names the descriptors and
// goroutines a process gained, alike ones counted together.
func TestGainedNamesWhatLeaked(t *testing.T) {
	before := readHeld()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	f, err := os.CreateTemp(t.TempDir(), "held-abcdef1234")
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	un, err := net.Listen("unix", filepath.Join(t.TempDir(), "held.sock"))
	require.NoError(t, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	after := readHeld()
	close(stop)
	<-done
	fds, gs := gained(before, after)
	require.Contains(t, fds, "2× pipe*")
	require.Contains(t, fds, "1× "+filepath.Dir(f.Name())+"/held*")
	require.Contains(t, fds, "1× socket* (tcp listen)")
	require.Contains(t, fds, "1× socket* (unix "+filepath.Dir(un.Addr().String())+"/held.sock)")
	require.Contains(t, gs, "1× cmd/intranode.TestGainedNamesWhatLeaked.func1 (from cmd/intranode.TestGainedNamesWhatLeaked)")
	require.NoError(t, errors.Join(r.Close(), w.Close(), f.Close(), ln.Close(), un.Close()))
	fds, gs = gained(before, readHeld())
	require.Empty(t, fds)
	require.Empty(t, gs)
}
