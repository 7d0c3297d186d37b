package connectivity

import "fmt"

// String returns "yes", "no" or "unknown"; it is also the JSON form.
func (a Access) String() string {
	switch a {
	case AccessYes:
		return "yes"
	case AccessNo:
		return "no"
	default:
		return "unknown"
	}
}

// MarshalText makes Access render as "yes", "no" or "unknown" in JSON.
func (a Access) MarshalText() ([]byte, error) {
	if a > AccessNo {
		return nil, fmt.Errorf("connectivity: invalid access state %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText is the inverse of MarshalText.
func (a *Access) UnmarshalText(text []byte) error {
	switch string(text) {
	case "yes":
		*a = AccessYes
	case "no":
		*a = AccessNo
	case "unknown":
		*a = AccessUnknown
	default:
		return fmt.Errorf("connectivity: access %q, want yes, no or unknown", text)
	}
	return nil
}

// Snapshot returns a copy of the cached states, one row per device, without
// querying anything: pairs not asked about yet are AccessUnknown. It is what
// WritePeerTable renders.
func (c *PeerCache) Snapshot() [][]Access {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]Access, c.n)
	for i := range out {
		out[i] = append([]Access(nil), c.state[i]...)
	}
	return out
}
