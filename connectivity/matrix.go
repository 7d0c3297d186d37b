package connectivity

import (
	"fmt"
)

// MaxDevices is the largest group intranode forms on one host (kMaxDevices in
// the reference).
const MaxDevices = 8

// LinkKind says what the counts of a Matrix measure.
type LinkKind string

// Link kinds reported by the backends.
const (
	// LinkNVLink counts NVLink lanes between two GPUs (direct or through
	// NVSwitch).
	LinkNVLink LinkKind = "nvlink"
	// LinkXGMI is 1 where ROCm reports the pair as P2P accessible.
	LinkXGMI LinkKind = "xgmi"
	// LinkShared is used by the fake backend: a count of emulated links.
	LinkShared LinkKind = "shared"
)

// Matrix counts the links between devices: Links[i][j] is the number of links
// from device i to device j. The diagonal is zero (a device is not linked to
// itself); rendering shows it as "X".
type Matrix struct {
	// Kind says what the counts measure.
	Kind LinkKind `json:"kind"`
	// Links is square, one row per device of the host.
	Links [][]int `json:"links"`
}

// NewMatrix returns an n×n matrix of the given kind with no links.
func NewMatrix(kind LinkKind, n int) Matrix {
	links := make([][]int, n)
	for i := range links {
		links[i] = make([]int, n)
	}
	return Matrix{Kind: kind, Links: links}
}

// Size is the number of devices the matrix describes.
func (m Matrix) Size() int { return len(m.Links) }

// At returns the link count from i to j, or 0 when either is out of range.
func (m Matrix) At(i, j int) int {
	if i < 0 || j < 0 || i >= len(m.Links) || j >= len(m.Links[i]) {
		return 0
	}
	return m.Links[i][j]
}

// Set records n links from i to j.
func (m Matrix) Set(i, j, n int) { m.Links[i][j] = n }

// Validate checks that the matrix is square with a zero diagonal and no
// negative counts.
func (m Matrix) Validate() error {
	n := len(m.Links)
	for i, row := range m.Links {
		if len(row) != n {
			return fmt.Errorf("connectivity: matrix row %d has %d entries, want %d", i, len(row), n)
		}
		for j, v := range row {
			if v < 0 {
				return fmt.Errorf("connectivity: negative link count %d at [%d][%d]", v, i, j)
			}
			if i == j && v != 0 {
				return fmt.Errorf("connectivity: diagonal entry [%d][%d] is %d, want 0", i, j, v)
			}
		}
	}
	return nil
}

// Sub returns the matrix restricted to the given devices, in the given order:
// Sub(devs).At(a, b) == m.At(devs[a], devs[b]). It is how a group's ranks see
// the links between the devices they selected.
func (m Matrix) Sub(devices []int) (Matrix, error) {
	out := NewMatrix(m.Kind, len(devices))
	for a, da := range devices {
		if da < 0 || da >= m.Size() {
			return Matrix{}, fmt.Errorf("connectivity: device %d out of range [0,%d)", da, m.Size())
		}
		for b, db := range devices {
			if db < 0 || db >= m.Size() {
				return Matrix{}, fmt.Errorf("connectivity: device %d out of range [0,%d)", db, m.Size())
			}
			if a != b {
				out.Links[a][b] = m.Links[da][db]
			}
		}
	}
	return out, nil
}

// Clone returns a deep copy.
func (m Matrix) Clone() Matrix {
	out := NewMatrix(m.Kind, m.Size())
	for i := range m.Links {
		copy(out.Links[i], m.Links[i])
	}
	return out
}
