package connectivity

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
)

// EnvForceFullyConnected names the environment variable that, when true
// ("1", "true"…), makes DetectGroup report FullyConnected whatever the links
// are, so that collectives can be exercised on machines without a usable
// interconnect. It is meant for tests only.
const EnvForceFullyConnected = "TEST_INTRA_NODE_COMM"

// hcmSize is the number of devices of a hybrid cube mesh, and hcmDegree the
// number of neighbours each of them has.
const (
	hcmSize   = 8
	hcmDegree = 4
)

// ErrInvalidGroup is matched (errors.Is) by DetectGroup's errors about the
// device list or the matrix it is given.
var ErrInvalidGroup = errors.New("connectivity: invalid device group")

// ErrNotHybridCubeMesh is matched (errors.Is) by HCMPeers' error for a
// matrix that is not a hybrid cube mesh.
var ErrNotHybridCubeMesh = errors.New("connectivity: not a hybrid cube mesh")

// Linked reports whether i and j are linked both ways. Collectives read and
// write peers' memory, so a one-way link does not count.
func (m Matrix) Linked(i, j int) bool {
	return i != j && m.At(i, j) > 0 && m.At(j, i) > 0
}

// Neighbours returns, in ascending order, the devices linked to i both ways.
func (m Matrix) Neighbours(i int) []int {
	var out []int
	for j := range m.Size() {
		if m.Linked(i, j) {
			out = append(out, j)
		}
	}
	return out
}

// Symmetric reports whether every count from i to j equals the count from j
// to i. Real interconnects are symmetric; a matrix that is not usually comes
// from a misread link.
func (m Matrix) Symmetric() bool {
	for i := range m.Links {
		for j := range m.Links[i] {
			if m.At(i, j) != m.At(j, i) {
				return false
			}
		}
	}
	return true
}

// Detect classifies the links of a group. m is the group's matrix, indexed by
// rank (see Matrix.Sub). A group is FullyConnected when it has at least two
// devices and every pair is linked both ways, HybridCubeMesh when it is the
// DGX-1 layout (see HybridCubeMesh), and Unknown otherwise, including when m
// is not a valid matrix. Detect does not read EnvForceFullyConnected; use
// DetectGroup for that.
func Detect(m Matrix) Topology {
	if m.Validate() != nil {
		return Unknown
	}
	if fullyConnected(m) {
		return FullyConnected
	}
	if _, ok := hcmQuads(m); ok {
		return HybridCubeMesh
	}
	return Unknown
}

// DetectGroup detects the topology of the group whose rank r runs on device
// devices[r] of a host described by m. It validates m and devices, restricts
// m to the group with Sub and calls Detect, except that EnvForceFullyConnected
// makes it return FullyConnected. A device listed twice is not linked to
// itself, so such a group is Unknown unless forced. Errors match
// ErrInvalidGroup.
func DetectGroup(m Matrix, devices []int) (Topology, error) {
	if err := m.Validate(); err != nil {
		return Unknown, fmt.Errorf("%w: host matrix: %w", ErrInvalidGroup, err)
	}
	if len(devices) == 0 || len(devices) > MaxDevices {
		return Unknown, fmt.Errorf("%w: %d devices, want 1 to %d", ErrInvalidGroup, len(devices), MaxDevices)
	}
	sub, err := m.Sub(devices)
	if err != nil {
		return Unknown, fmt.Errorf("%w: %w", ErrInvalidGroup, err)
	}
	if ForcedFullyConnected() {
		slog.Debug("connectivity: topology forced", "topology", FullyConnected, "env", EnvForceFullyConnected)
		return FullyConnected, nil
	}
	t := Detect(sub)
	slog.Debug("connectivity: topology detected", "topology", t, "devices", devices)
	return t, nil
}

// ForcedFullyConnected reports whether EnvForceFullyConnected is set to a
// true value (as strconv.ParseBool reads it).
func ForcedFullyConnected() bool {
	v, err := strconv.ParseBool(os.Getenv(EnvForceFullyConnected))
	return err == nil && v
}

// HCMPeers returns, for each rank of a hybrid cube mesh group, its three quad
// peers in ascending order followed by its neighbour in the other quad. m is
// indexed by rank, as for Detect. The error matches ErrNotHybridCubeMesh when
// Detect(m) is not HybridCubeMesh.
func HCMPeers(m Matrix) ([][4]int, error) {
	quad, ok := hcmQuads(m)
	if !ok || m.Validate() != nil {
		return nil, fmt.Errorf("%w: topology is %s", ErrNotHybridCubeMesh, Detect(m))
	}
	peers := make([][4]int, hcmSize)
	for r := range peers {
		k := 0
		for _, p := range m.Neighbours(r) {
			if quad[p] == quad[r] {
				peers[r][k] = p
				k++
			} else {
				peers[r][3] = p
			}
		}
	}
	return peers, nil
}

func fullyConnected(m Matrix) bool {
	n := m.Size()
	if n < 2 {
		return false
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if !m.Linked(i, j) {
				return false
			}
		}
	}
	return true
}

// hcmQuads splits a hybrid cube mesh into its two quads: quad[d] is 0 for the
// devices of device 0's quad and 1 for the others. ok is false when m is not
// a hybrid cube mesh: 8 devices, each with exactly 4 neighbours, split into
// two fully connected quads with exactly one neighbour across.
//
// Device 0's quad is its neighbours that are linked to two of its other
// neighbours: in a hybrid cube mesh those are its three quad peers, while its
// cross neighbour has no other link into device 0's quad.
func hcmQuads(m Matrix) (quad [hcmSize]int, ok bool) {
	if m.Size() != hcmSize {
		return quad, false
	}
	for d := range hcmSize {
		if len(m.Neighbours(d)) != hcmDegree {
			return quad, false
		}
		quad[d] = 1
	}
	quad[0] = 0
	own := 1
	n0 := m.Neighbours(0)
	for _, p := range n0 {
		shared := 0
		for _, q := range n0 {
			if m.Linked(p, q) {
				shared++
			}
		}
		if shared == 2 {
			quad[p] = 0
			own++
		}
	}
	if own != hcmSize/2 {
		return quad, false
	}
	// Check the definition itself rather than trust the shortcut above.
	for d := range hcmSize {
		inside, across := 0, 0
		for _, p := range m.Neighbours(d) {
			if quad[p] == quad[d] {
				inside++
			} else {
				across++
			}
		}
		if inside != hcmDegree-1 || across != 1 {
			return quad, false
		}
	}
	return quad, true
}
