package race

import (
	"os"
	"runtime"
)

// ShareCores is for the test mains of the heaviest packages: built with
// the race detector, and unless GOMAXPROCS is set, the process runs a
// quarter of the machine's cores at once (at least one), and returns the
// GOMAXPROCS it set (0 when it left it alone). `go test ./...` runs several
// packages at once, and under the detector every fresh page of its shadow
// memory is first mapped read-only and then copied on write, a fault that
// flushes the TLB of every CPU running one of the process's threads: on
// the 2-core development machine, conformance's heaviest case spent 10 s
// in the kernel against 6 s in the program with two threads running, 2.7 s
// against 5.1 with one (2026-11-26, docs/PERFORMANCE.md). Scheduling goes
// on as before (goroutines are preempted and interleave), and the detector
// needs no parallelism to find races: it tracks happens-before.
func ShareCores() int {
	if !Enabled {
		return 0
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return 0
	}
	n := max(1, runtime.NumCPU()/4)
	runtime.GOMAXPROCS(n)
	return n
}
