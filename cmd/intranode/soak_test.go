package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHungStacks(t *testing.T) {
	const dump = `SIGQUIT: quit
PC=0x4711 m=0 sigcode=0

goroutine 1 gp=0xc000002380 m=nil [syscall, 2 minutes]:
runtime.cgocall(0x9b2a40, 0xc0001a5c30)
	/usr/local/go/src/runtime/cgocall.go:167 +0x4b
github.com/intranode/intranode/backend/cuda._Cfunc_inu_nccl_abort(0x1, 0x2)
	_cgo_gotypes.go:512 +0x47
github.com/intranode/intranode/backend/cuda.(*ncclComm).release.func1()
	/src/backend/cuda/nccl.go:426 +0x35
created by github.com/intranode/intranode/backend/cuda.(*ncclComm).release in goroutine 7
	/src/backend/cuda/nccl.go:424 +0x9e

goroutine 5 gp=0xc000003340 m=nil [chan receive]:
os/signal.loop()
	/usr/local/go/src/os/signal/signal_unix.go:23 +0x13
`
	for _, tc := range []struct {
		name, output, want string
	}{
		{"a rank in a C call", dump, "stacks: 1 gp=0xc000002380 m=nil [syscall, 2 minutes]: runtime.cgocall < " +
			"backend/cuda._Cfunc_inu_nccl_abort < backend/cuda.(*ncclComm).release.func1"},
		{"no Go dump", "killed\n", "no stack of this module's code in its output"},
		{"only the runtime's goroutines", "goroutine 5 [chan receive]:\nos/signal.loop()\n\t/x.go:1\n",
			"no stack of this module's code in its output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, hungStacks(tc.output))
		})
	}
}

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
