package conformance_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intranode/intranode/conformance"
)

// onlyFaults selects the faults group.
func onlyFaults(name string) bool { return strings.HasPrefix(name, "faults/") }

// TestFakeFaults runs the faults group on the fake backend, a few trials of
// each case with ranks as processes, within CI's budget: one second
// deadlines, a world of three so that a fault leaves more than one
// survivor, and a case's two trials at once (they mostly wait out
// deadlines; the load of the other is load the deadlines must withstand).
func TestFakeFaults(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Backend: "fake", Mode: conformance.Processes, Worlds: []int{3},
		Quick: true, ChildArgs: []string{"-test.run=^$"}, Faults: true, Trials: 2, FaultParallel: 2,
		FaultDeadline: time.Second, Filter: onlyFaults})
}

// TestFakeFaultsLateVictim runs fault cases with the victim starting
// four deadlines after the other ranks (Config.StartSkew), as a rank
// process slow to start does on a loaded machine: the ranks meet at the
// trial's start barrier, and the survivors still fail within the deadline
// once the victim dies or stalls. Without the barrier, ipc-name-taken's
// victim finds its peers gone. kill-barrier's and kill-allreduce's
// survivors gave up on the late victim's rendezvous too, until their
// rendezvous got the setup deadline (killDuring).
func TestFakeFaultsLateVictim(t *testing.T) {
	t.Parallel() // mostly waiting for the late victim
	conformance.RunTests(t, conformance.Config{Backend: "fake", Mode: conformance.Processes, Worlds: []int{2}, Hosts: 2,
		Quick: true, ChildArgs: []string{"-test.run=^$"}, Faults: true, FaultDeadline: 500 * time.Millisecond,
		StartSkew: 2 * time.Second,
		Filter:    regexp.MustCompile(`^faults/(kill-(rendezvous|barrier|allreduce|hosts)|stall-(rendezvous|barrier)|ipc-name-taken)$`).MatchString})
}

// TestFakeFaultsGoroutines runs the cases that need no process of their
// own (the stalls) with ranks as goroutines; the others skip.
func TestFakeFaultsGoroutines(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Backend: "fake", Worlds: []int{4}, Quick: true, Faults: true,
		Trials: 2, FaultParallel: 2, FaultDeadline: time.Second, Filter: onlyFaults})
}

// TestFaultsAreOptIn checks that the default suite leaves the faults
// group out.
func TestFaultsAreOptIn(t *testing.T) {
	ran := false
	conformance.RunTests(t, conformance.Config{Backend: "fake", Filter: func(name string) bool {
		ran = ran || onlyFaults(name)
		return false
	}})
	if ran {
		t.Fatal("a fault case was considered without Config.Faults")
	}
}
