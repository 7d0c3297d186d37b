package conformance_test

import (
	"os"
	"strings"
	"testing"

	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/internal/race"

	_ "github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/conformance"
	_ "github.com/intranode/intranode/kernels/cpu"
)

func TestMain(m *testing.M) {
	conformance.MaybeChild()
	launch.QuietRaceExit()
	race.ShareCores()
	os.Exit(m.Run())
}

// TestFakeGoroutines runs the whole suite on the fake backend with ranks as
// goroutines of this process.
//
// The suite's groups run in parallel with each other (not with the fault
// cases, whose checks bound how late an error may come).
func TestFakeGoroutines(t *testing.T) {
	t.Parallel()
	conformance.RunTests(t, conformance.Config{Backend: "fake", Worlds: []int{2, 4, 8}, Quick: true})
}

// TestFakeProcesses runs it with every rank a separate process sharing
// memory through memfd descriptors passed over the IPC channel.
func TestFakeProcesses(t *testing.T) {
	t.Parallel()
	conformance.RunTests(t, conformance.Config{Backend: "fake", Mode: conformance.Processes, Worlds: []int{2, 4},
		Quick: true, ChildArgs: []string{"-test.run=^$"}})
}

// TestFakeOddWorld runs the reduction-op cases with three ranks, where an
// average's division rounds and int32's truncates.
func TestFakeOddWorld(t *testing.T) {
	t.Parallel()
	conformance.RunTests(t, conformance.Config{Backend: "fake", Worlds: []int{3}, Quick: true,
		Filter: func(name string) bool { return strings.HasSuffix(name, "/ops") }})
}

// TestFakeHybridCubeMesh runs the all-reduce cases on the DGX-1 layout,
// where HCM applies.
func TestFakeHybridCubeMesh(t *testing.T) {
	t.Parallel()
	conformance.RunTests(t, conformance.Config{Backend: "fake:topology=hcm", Worlds: []int{8}, Quick: true,
		Filter: func(name string) bool { return len(name) > 10 && name[:10] == "allreduce/" }})
}

// TestFakeRing checks the topology refusal on a layout with unusable groups.
func TestFakeRing(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Backend: "fake:topology=ring", Worlds: []int{4}, Quick: true,
		Filter: func(name string) bool { return name == "rendezvous/refuse-topology" }})
}

// TestFakeBrokenP2P runs the rendezvous cases with devices 0 and 1 linked
// but failing their peer-access test: groups using the pair are refused
// (rendezvous/refuse-broken-p2p), in both modes, since child processes
// open the fake by the same name.
func TestFakeBrokenP2P(t *testing.T) {
	t.Parallel()
	const fake = "fake:brokenp2p=0-1"
	filter := func(name string) bool {
		return strings.HasPrefix(name, "rendezvous/") || strings.HasPrefix(name, "connectivity/")
	}
	t.Run("goroutines", func(t *testing.T) {
		conformance.RunTests(t, conformance.Config{Backend: fake, Worlds: []int{2, 4}, Quick: true, Filter: filter})
	})
	t.Run("processes", func(t *testing.T) {
		conformance.RunTests(t, conformance.Config{Backend: fake, Mode: conformance.Processes, Worlds: []int{2},
			Quick: true, ChildArgs: []string{"-test.run=^$"}, Filter: filter})
	})
}

// TestFakeSharedDevice runs the suite with every rank on the one device of
// the fake (Config.ShareDevice), as `intranode conformance --share-device`
// does on a single GPU.
func TestFakeSharedDevice(t *testing.T) {
	t.Parallel()
	conformance.RunTests(t, conformance.Config{Backend: "fake:devices=1", Worlds: []int{2, 4}, Quick: true, ShareDevice: true})
}

// TestSharedDeviceNeedsGoroutines checks that a shared device is refused
// with ranks as processes (each would have a context of its own).
func TestSharedDeviceNeedsGoroutines(t *testing.T) {
	_, err := conformance.Run(t.Context(), conformance.Config{Backend: "fake", Mode: conformance.Processes, ShareDevice: true,
		ChildArgs: []string{"-test.run=^$"}}, func(conformance.Result) {})
	if err == nil || !strings.Contains(err.Error(), "ShareDevice needs ranks as goroutines") {
		t.Fatalf("want the shared device refused in processes mode, got %v", err)
	}
}
