package connectivity

import (
	"encoding/json"
	"fmt"
)

// ParseTopology is the inverse of Topology.String.
func ParseTopology(s string) (Topology, error) {
	for _, t := range []Topology{Unknown, FullyConnected, HybridCubeMesh} {
		if s == t.String() {
			return t, nil
		}
	}
	return Unknown, fmt.Errorf("connectivity: topology %q, want Unknown, FullyConnected or HybridCubeMesh", s)
}

// UnmarshalText reads a topology by name, so Topology round-trips through
// JSON.
func (t *Topology) UnmarshalText(text []byte) error {
	v, err := ParseTopology(string(text))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseMatrix decodes a Matrix from its JSON form ({"kind": …, "links":
// [[…]…]}) and validates it, so a hand-written matrix (a fake backend's
// topology, a saved `intranode topo` report) is checked once on the way in.
func ParseMatrix(data []byte) (Matrix, error) {
	var m Matrix
	if err := json.Unmarshal(data, &m); err != nil {
		return Matrix{}, fmt.Errorf("connectivity: decoding matrix: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Matrix{}, err
	}
	return m, nil
}
