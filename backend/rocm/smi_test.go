//go:build rocm

package rocm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/connectivity"
)

// fakeLink is one ordered pair of a fakeSMI.
type fakeLink struct {
	p2p  bool
	t    LinkType
	hops uint64
}

// fakeSMI is an SMI whose GPUs sit at the given bus ids (SMI order) and
// whose pairs answer from links (absent pairs: not P2P, PCIe, 3 hops, as a
// dual-socket PCIe path reads). fail makes one operation fail with status.
type fakeSMI struct {
	lib    string
	buses  []string
	links  map[[2]int]fakeLink
	fail   string // "count", "bdf", "p2p" or "link"
	failAt [2]int // the device (bdf) or pair (p2p, link) that fails
	status int
	closed bool
}

func (s *fakeSMI) err(op string, at ...int) error {
	if s.fail != op {
		return nil
	}
	for k, v := range at {
		if s.failAt[k] != v {
			return nil
		}
	}
	return &SMIError{Library: s.lib, Op: "fake_" + op, Status: s.status, Description: "injected"}
}

func (s *fakeSMI) Library() string { return s.lib }

func (s *fakeSMI) DeviceCount() (int, error) {
	if err := s.err("count"); err != nil {
		return 0, err
	}
	return len(s.buses), nil
}

func (s *fakeSMI) BusID(i int) (string, error) {
	if err := s.err("bdf", i); err != nil {
		return "", err
	}
	return s.buses[i], nil
}

func (s *fakeSMI) P2PAccessible(i, j int) (bool, error) {
	if err := s.err("p2p", i, j); err != nil {
		return false, err
	}
	return s.links[[2]int{i, j}].p2p, nil
}

func (s *fakeSMI) Link(i, j int) (uint64, LinkType, error) {
	if err := s.err("link", i, j); err != nil {
		return 0, LinkUndefined, err
	}
	l, ok := s.links[[2]int{i, j}]
	if !ok {
		return 3, LinkPCIe, nil
	}
	return l.hops, l.t, nil
}

func (s *fakeSMI) Close() error {
	s.closed = true
	return nil
}

// busOf is the bus id of GPU k of the fake boxes.
func busOf(k int) string { return fmt.Sprintf("0000:%02x:00.0", 0x11+0x10*k) }

// xgmiBox is an n-GPU box whose every pair is P2P over one XGMI hop (an
// MI300X platform: 8 GPUs, each with a direct link to each other).
func xgmiBox(n int) *fakeSMI {
	s := &fakeSMI{lib: "amdsmi", links: map[[2]int]fakeLink{}}
	for i := range n {
		s.buses = append(s.buses, busOf(i))
		for j := range n {
			if i != j {
				s.links[[2]int{i, j}] = fakeLink{p2p: true, t: LinkXGMI, hops: 1}
			}
		}
	}
	return s
}

// partialBox is 4 GPUs in two XGMI pairs (0-1, 2-3); across the pairs P2P
// goes over PCIe.
func partialBox() *fakeSMI {
	s := &fakeSMI{lib: "rocm-smi", links: map[[2]int]fakeLink{}}
	for i := range 4 {
		s.buses = append(s.buses, busOf(i))
		for j := range 4 {
			switch {
			case i == j:
			case i/2 == j/2:
				s.links[[2]int{i, j}] = fakeLink{p2p: true, t: LinkXGMI, hops: 1}
			default:
				s.links[[2]int{i, j}] = fakeLink{p2p: true, t: LinkPCIe, hops: 2}
			}
		}
	}
	return s
}

func buses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = busOf(i)
	}
	return out
}

func TestXGMIMatrixEightGPUsFullyConnected(t *testing.T) {
	m, pairs, err := XGMIMatrix(xgmiBox(8), buses(8))
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	require.Equal(t, connectivity.LinkXGMI, m.Kind)
	for i := range 8 {
		for j := range 8 {
			want := 1
			if i == j {
				want = 0
			}
			require.Equal(t, want, m.At(i, j), "[%d][%d]", i, j)
		}
	}
	require.Equal(t, connectivity.FullyConnected, connectivity.Detect(m))
	require.Len(t, pairs, 56)
	require.Equal(t, PairLink{From: 0, To: 1, P2P: true, Type: LinkXGMI, Hops: 1, Links: 1}, pairs[0])
}

func TestXGMIMatrixFourGPUsPartial(t *testing.T) {
	m, pairs, err := XGMIMatrix(partialBox(), buses(4))
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 0}}, m.Links)
	require.Equal(t, connectivity.Unknown, connectivity.Detect(m))
	// Each XGMI pair on its own is a usable group.
	for _, group := range [][]int{{0, 1}, {2, 3}} {
		topo, err := connectivity.DetectGroup(m, group)
		require.NoError(t, err)
		require.Equal(t, connectivity.FullyConnected, topo, "group %v", group)
	}
	topo, err := connectivity.DetectGroup(m, []int{1, 2})
	require.NoError(t, err)
	require.Equal(t, connectivity.Unknown, topo)
	// PCIe pairs are P2P but count no link.
	for _, p := range pairs {
		if p.From/2 != p.To/2 {
			require.True(t, p.P2P)
			require.Equal(t, LinkPCIe, p.Type)
			require.Zero(t, p.Links)
		}
	}
}

func TestXGMIMatrixP2PRefused(t *testing.T) {
	s := xgmiBox(4)
	// XGMI-linked, but the driver refuses peer access between 1 and 3 (one
	// way), as it does when a process is not allowed peer mappings.
	s.links[[2]int{1, 3}] = fakeLink{p2p: false, t: LinkXGMI, hops: 1}
	m, pairs, err := XGMIMatrix(s, buses(4))
	require.NoError(t, err)
	require.Zero(t, m.At(1, 3))
	require.Equal(t, 1, m.At(3, 1))
	require.False(t, m.Symmetric())
	require.Equal(t, connectivity.Unknown, connectivity.Detect(m), "a one-way link is not a link")
	for _, p := range pairs {
		if p.From == 1 && p.To == 3 {
			require.Equal(t, PairLink{From: 1, To: 3}, p, "the link type is not asked for a refused pair")
		}
	}
}

func TestXGMIMatrixMultiHopCounts(t *testing.T) {
	// MI250X: 8 GCDs; some pairs are two XGMI hops apart but still P2P.
	s := xgmiBox(8)
	s.links[[2]int{0, 5}] = fakeLink{p2p: true, t: LinkXGMI, hops: 2}
	m, pairs, err := XGMIMatrix(s, buses(8))
	require.NoError(t, err)
	require.Equal(t, 1, m.At(0, 5))
	found := false
	for _, p := range pairs {
		if p.From == 0 && p.To == 5 {
			found = true
			require.Equal(t, uint64(2), p.Hops)
		}
	}
	require.True(t, found)
}

func TestXGMIMatrixLinkTypeNotSupported(t *testing.T) {
	// Old rocm-smi without link types: P2P pairs count, as in the
	// reference's rsmi_is_P2P_accessible loop.
	s := xgmiBox(2)
	s.fail, s.failAt, s.status = "link", [2]int{0, 1}, smiNotSupported
	m, _, err := XGMIMatrix(s, buses(2))
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1}, {1, 0}}, m.Links)
}

func TestXGMIMatrixMapsHIPOrder(t *testing.T) {
	// HIP sees GPUs 2 and 0 of the SMI library, in that order
	// (HIP_VISIBLE_DEVICES=2,0); their link is XGMI, the others' PCIe.
	s := partialBox()
	s.links[[2]int{0, 2}] = fakeLink{p2p: true, t: LinkXGMI, hops: 1}
	s.links[[2]int{2, 0}] = fakeLink{p2p: true, t: LinkXGMI, hops: 1}
	m, pairs, err := XGMIMatrix(s, []string{busOf(2), busOf(0)})
	require.NoError(t, err)
	require.Equal(t, [][]int{{0, 1}, {1, 0}}, m.Links)
	require.Equal(t, 0, pairs[0].From)
	require.Equal(t, 1, pairs[0].To)
}

func TestXGMIMatrixLibraryFailures(t *testing.T) {
	const initError = 8 // RSMI_STATUS_INIT_ERROR
	for _, c := range []struct {
		name   string
		fail   string
		at     [2]int
		expect string
	}{
		{"count", "count", [2]int{}, "counting devices: amdsmi: fake_count: injected (status 8)"},
		{"bdf", "bdf", [2]int{2, 0}, "amdsmi device 2: amdsmi: fake_bdf"},
		{"p2p", "p2p", [2]int{1, 3}, "HIP devices 1→3 (amdsmi devices 1→3): amdsmi: fake_p2p"},
		{"link", "link", [2]int{3, 0}, "HIP devices 3→0 (amdsmi devices 3→0): amdsmi: fake_link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := xgmiBox(4)
			s.fail, s.failAt, s.status = c.fail, c.at, initError
			_, _, err := XGMIMatrix(s, buses(4))
			require.ErrorContains(t, err, c.expect)
			var se *SMIError
			require.ErrorAs(t, err, &se)
			require.Equal(t, initError, se.Status)
			require.ErrorIs(t, gpu.Wrap(err, "rocm: link matrix"), backend.ErrUnavailable)
		})
	}
}

func TestXGMIMatrixUnmatchedDevices(t *testing.T) {
	_, _, err := XGMIMatrix(xgmiBox(2), []string{busOf(0), busOf(5)})
	require.ErrorIs(t, err, backend.ErrNotFound)
	require.ErrorContains(t, err, "HIP device 1 (0000:61:00.0) is not among amdsmi's 2 devices")

	s := xgmiBox(2)
	s.buses[1] = s.buses[0]
	_, _, err = XGMIMatrix(s, buses(1))
	require.ErrorIs(t, err, backend.ErrNotSupported)
	require.ErrorContains(t, err, "share PCI bus id 0000:11:00.0")
}

func TestBDFString(t *testing.T) {
	// Domain 0, bus 0xc1, device 0, function 0.
	require.Equal(t, "0000:c1:00.0", bdfString(0xc1<<8))
	// Domain 1, bus 0x2a, device 3, function 1, partition 2 (bits 28-31).
	require.Equal(t, "0001:2a:03.1", bdfString(1<<32|2<<28|0x2a<<8|3<<3|1))
}

// TestNormalizeBusID checks the backend's use of
// connectivity.NormalizeBusID (its cases are there).
func TestNormalizeBusID(t *testing.T) {
	got, err := NormalizeBusID("0000:C1:00.0")
	require.NoError(t, err)
	require.Equal(t, "0000:c1:00.0", got)
	_, err = NormalizeBusID("0000:c1:00.8")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

// writeKFD writes a KFD topology under root: a CPU node, then one GPU node
// per entry (bus id → gfx_target_version).
func writeKFD(t *testing.T, root string, gpus map[string]uint64) {
	t.Helper()
	node := func(k int, props string) {
		dir := filepath.Join(root, fmt.Sprint(k))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "properties"), []byte(props), 0o644))
	}
	node(0, "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\nlocation_id 0\ndomain 0\n")
	k := 1
	for bus, target := range gpus {
		id, err := NormalizeBusID(bus)
		require.NoError(t, err)
		var d, b, dev, fn uint64
		_, err = fmt.Sscanf(id, "%x:%x:%x.%x", &d, &b, &dev, &fn)
		require.NoError(t, err)
		node(k, fmt.Sprintf("cpu_cores_count 0\nsimd_count 1216\ngfx_target_version %d\nlocation_id %d\ndomain %d\nwave_front_size 64\n",
			target, b<<8|dev<<3|fn, d))
		k++
	}
}

func TestKFDArchitectures(t *testing.T) {
	root := t.TempDir()
	writeKFD(t, root, map[string]uint64{"0000:c1:00.0": 90402, "0001:11:00.0": 90010, "0000:03:00.0": 110000})
	archs, err := kfdArchitectures(root)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:c1:00.0": "gfx942", "0001:11:00.0": "gfx90a", "0000:03:00.0": "gfx1100"}, archs)

	archs, err = kfdArchitectures(filepath.Join(root, "absent"))
	require.NoError(t, err)
	require.Empty(t, archs)
}
