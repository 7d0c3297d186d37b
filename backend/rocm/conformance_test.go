//go:build rocm

package rocm

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/conformance"
)

func TestMain(m *testing.M) {
	// A conformance child process runs its case and exits here.
	conformance.MaybeChild()
	os.Exit(m.Run())
}

// The rocm backend over the fake runtime with 8 GPUs, registered under its
// own name so that conformance child processes (this test binary
// re-executed) can open it. envFakeHandles picks how shareable memory
// travels: "ipc" (a ROCm 6.2 runtime: IPC handles) or "fd" (ROCm 7.2:
// uncached hipMemCreate memory, file descriptors); envFakeBox how the GPUs
// are linked: "xgmi" (all pairs, the default), "hcm" (a hybrid cube mesh)
// or "pairs" (0-1, 2-3, 4-5, 6-7); envFakeBrokenP2P, when set, makes peer
// copies between GPUs 0 and 1 silently go nowhere, so that their peer
// test fails although they are linked.
const (
	fakeDriver       = "rocm-fakehip"
	envFakeHandles   = "INTRANODE_ROCM_TEST_FAKE_HANDLES"
	envFakeBox       = "INTRANODE_ROCM_TEST_FAKE_BOX"
	envFakeBrokenP2P = "INTRANODE_ROCM_TEST_FAKE_BROKEN_P2P"
)

func init() {
	backend.Register(backend.Driver{Name: fakeDriver, Priority: -1, Open: func(ctx context.Context, _ string) (backend.Backend, error) {
		h := newFakeHIP(8)
		if os.Getenv(envFakeHandles) == "fd" {
			h.version, h.vmmUncached = 70251830, true
		}
		if os.Getenv(envFakeBrokenP2P) != "" {
			h.brokenPeer[[2]int{0, 1}], h.brokenPeer[[2]int{1, 0}] = true, true
		}
		box := xgmiBox(8)
		switch os.Getenv(envFakeBox) {
		case "hcm":
			box = linkedBox(8, func(i, j int) bool { return i/4 == j/4 || j == i^4 })
		case "pairs":
			box = linkedBox(8, func(i, j int) bool { return i/2 == j/2 })
		}
		return openWith(ctx, func() (hipRuntime, error) { return h, nil }, func() (SMI, error) { return box, nil }, kfdTopology+"-absent")
	}})
}

// linkedBox is an n-GPU box whose pairs are joined by one XGMI hop where
// linked says so, and are not P2P otherwise.
func linkedBox(n int, linked func(i, j int) bool) *fakeSMI {
	s := xgmiBox(n)
	for i := range n {
		for j := range n {
			if i != j && !linked(i, j) {
				s.links[[2]int{i, j}] = fakeLink{}
			}
		}
	}
	return s
}

// TestConformance runs the shared suite on the real backend: ranks as
// goroutines, then as processes. Without an AMD GPU it skips, saying why.
func TestConformance(t *testing.T) {
	t.Run("goroutines", func(t *testing.T) {
		conformance.RunTests(t, conformance.Config{Backend: Name, Worlds: []int{2}})
	})
	t.Run("processes", func(t *testing.T) {
		conformance.RunTests(t, conformance.Config{Backend: Name, Mode: conformance.Processes, Worlds: []int{2},
			ChildArgs: []string{"-test.run=^$"}})
	})
}

// TestConformanceFakeHIP runs the shared suite through the whole backend
// (device enumeration, shareable memory, peer access, launches, graphs)
// over the fake runtime, whose kernels are the Go kernels of package
// kernels/cpu: both ways of sharing memory, ranks as goroutines of one
// process (which map each other's memory by address or by descriptor) and
// as separate processes (IPC handles opened through the fake's
// /proc/<pid>/fd path, descriptors passed over the IPC channel).
func TestConformanceFakeHIP(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite over the fake runtime takes a while")
	}
	for _, handles := range []string{"ipc", "fd"} {
		t.Run(handles, func(t *testing.T) {
			t.Setenv(envFakeHandles, handles)
			t.Run("goroutines", func(t *testing.T) {
				conformance.RunTests(t, conformance.Config{Backend: fakeDriver, Worlds: []int{2, 4}, Quick: true})
			})
			t.Run("processes", func(t *testing.T) {
				conformance.RunTests(t, conformance.Config{Backend: fakeDriver, Mode: conformance.Processes, Worlds: []int{2},
					Quick: true, ChildArgs: []string{"-test.run=^$"}})
			})
		})
	}
	// The cases the fully connected box skips: HCM on a hybrid cube mesh,
	// and the refusal of a group whose devices are not all linked.
	t.Run("hcm", func(t *testing.T) {
		t.Setenv(envFakeBox, "hcm")
		conformance.RunTests(t, conformance.Config{Backend: fakeDriver, Worlds: []int{8}, Quick: true,
			Filter: func(name string) bool { return strings.HasPrefix(name, "allreduce/hcm/") }})
	})
	t.Run("pairs", func(t *testing.T) {
		t.Setenv(envFakeBox, "pairs")
		conformance.RunTests(t, conformance.Config{Backend: fakeDriver, Worlds: []int{4}, Quick: true,
			Filter: func(name string) bool { return name == "rendezvous/refuse-topology" }})
	})
	// Linked GPUs whose peer test fails: rendezvous refuses them with the
	// backend's reason, on every rank.
	t.Run("broken-p2p", func(t *testing.T) {
		t.Setenv(envFakeBrokenP2P, "1")
		only := func(name string) bool { return name == "rendezvous/refuse-broken-p2p" }
		conformance.RunTests(t, conformance.Config{Backend: fakeDriver, Worlds: []int{2, 4}, Quick: true, Filter: only})
		conformance.RunTests(t, conformance.Config{Backend: fakeDriver, Mode: conformance.Processes, Worlds: []int{2},
			Quick: true, ChildArgs: []string{"-test.run=^$"}, Filter: only})
	})
}
