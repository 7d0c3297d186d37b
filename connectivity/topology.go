package connectivity

// Topology classifies how the devices of a group are linked.
type Topology uint8

// The topologies of the reference.
const (
	// Unknown is any layout intranode has no algorithm for.
	Unknown Topology = iota
	// FullyConnected: every pair of the group is linked both ways.
	FullyConnected
	// HybridCubeMesh is the DGX-1 layout: 8 devices, each with exactly 4
	// neighbours, 3 in its own fully connected quad and 1 in the other quad.
	HybridCubeMesh
)

// String returns the name used in logs, tables and JSON.
func (t Topology) String() string {
	switch t {
	case FullyConnected:
		return "FullyConnected"
	case HybridCubeMesh:
		return "HybridCubeMesh"
	default:
		return "Unknown"
	}
}

// MarshalText makes Topology render by name in JSON.
func (t Topology) MarshalText() ([]byte, error) { return []byte(t.String()), nil }
