//go:build rocm

package rocm

import (
	"errors"
	"fmt"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// LinkType is how a system management library says two GPUs are connected
// (amdsmi_link_type_t, rsmi's RSMI_IO_LINK_TYPE: the numbers agree).
type LinkType int

// Link types.
const (
	LinkUndefined LinkType = 0
	LinkPCIe      LinkType = 1
	LinkXGMI      LinkType = 2
)

// linkTypeNames are the String names, by value.
var linkTypeNames = [...]string{LinkUndefined: "UNDEFINED", LinkPCIe: "PCIE", LinkXGMI: "XGMI"}

// String names the type as rocm-smi --showtopotype does.
func (t LinkType) String() string {
	if t >= 0 && int(t) < len(linkTypeNames) {
		return linkTypeNames[t]
	}
	return fmt.Sprintf("link type %d", int(t))
}

// MarshalText makes LinkType render by name in JSON.
func (t LinkType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// SMI is a system management library's view of the host's AMD GPUs, as the
// link matrix needs it: amdsmi (libamd_smi.so) where it is installed,
// rocm-smi (librocm_smi64.so) otherwise. Devices are numbered by the
// library, which sees every GPU of the host in its own order; the HIP
// runtime may see fewer (HIP_VISIBLE_DEVICES) in another order, so the two
// are matched by PCI bus id. Failures are *SMIError values.
type SMI interface {
	// Library is "amdsmi" or "rocm-smi".
	Library() string
	// DeviceCount is the number of GPUs the library sees.
	DeviceCount() (int, error)
	// BusID is device i's PCI bus id in NormalizeBusID form.
	BusID(i int) (string, error)
	// P2PAccessible reports whether device i can reach device j's memory
	// directly (amdsmi_is_P2P_accessible, rsmi_is_P2P_accessible).
	P2PAccessible(i, j int) (bool, error)
	// Link returns how i and j are connected and over how many hops
	// (amdsmi_topo_get_link_type, rsmi_topo_get_link_type).
	Link(i, j int) (hops uint64, t LinkType, err error)
	// Close shuts the library down.
	Close() error
}

// PairLink records what the SMI library said about one ordered pair of HIP
// devices and how LinkMatrix counted it.
type PairLink struct {
	// From and To are HIP device indexes.
	From int `json:"from"`
	To   int `json:"to"`
	// P2P is the library's P2P-accessible answer.
	P2P bool `json:"p2p"`
	// Type and Hops describe the connection; Type is LinkUndefined and
	// Hops 0 when the library cannot tell (the query is not supported).
	Type LinkType `json:"type"`
	Hops uint64   `json:"hops"`
	// Links is what the matrix counts for the pair.
	Links int `json:"links"`
}

// bdfString spells a BDFID (amdsmi_get_gpu_bdf_id, rsmi_dev_pci_id_get:
// domain in bits 32–63, bus 8–15, device 3–7, function 0–2; newer amdsmi
// puts a partition id in bits 28–31, which is not part of the PCI address)
// as NormalizeBusID does.
func bdfString(id uint64) string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", id>>32, id>>8&0xff, id>>3&0x1f, id&7)
}

// NormalizeBusID is connectivity.NormalizeBusID: HIP's "0000:C1:00.0",
// SMI's BDFIDs and KFD's location ids compare equal.
// A malformed id is an error matching backend.ErrInvalidArgument.
func NormalizeBusID(id string) (string, error) {
	n, err := connectivity.NormalizeBusID(id)
	if err != nil {
		return "", backend.Errorf(backend.CodeInvalidArgument, "%w", err)
	}
	return n, nil
}

// smiIndex maps every HIP device, given by its normalised bus id in HIP
// order, to the SMI library's index of the same GPU.
func smiIndex(s SMI, hipBusIDs []string) ([]int, error) {
	n, err := s.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("counting devices: %w", err)
	}
	byBus := make(map[string]int, n)
	for k := range n {
		id, err := s.BusID(k)
		if err != nil {
			return nil, fmt.Errorf("%s device %d: %w", s.Library(), k, err)
		}
		if prev, dup := byBus[id]; dup {
			return nil, backend.Errorf(backend.CodeNotSupported,
				"%s devices %d and %d share PCI bus id %s (a partitioned GPU?): the link matrix cannot tell them apart", s.Library(), prev, k, id)
		}
		byBus[id] = k
	}
	out := make([]int, len(hipBusIDs))
	for i, id := range hipBusIDs {
		k, ok := byBus[id]
		if !ok {
			return nil, backend.Errorf(backend.CodeNotFound, "HIP device %d (%s) is not among %s's %d devices", i, id, s.Library(), n)
		}
		out[i] = k
	}
	return out, nil
}

// XGMIMatrix builds the link matrix of the HIP devices whose normalised PCI
// bus ids are given in HIP order; Links[i][j] is in HIP indexes and of kind
// connectivity.LinkXGMI.
//
// For every ordered pair the library is asked whether i can reach j's
// memory directly and how they are connected. A P2P-accessible pair joined
// by XGMI counts as one link, whatever the number of hops (the kernels read
// peers' memory directly, which a multi-hop XGMI route serves too; PairLink
// keeps the hops). A P2P-accessible pair over PCIe counts none: the
// collectives need XGMI. Where the library cannot say what the link is
// (the type query is not supported), a P2P-accessible pair counts, as in
// the reference's rsmi_is_P2P_accessible loop. Any other failure is an error
// naming the pair.
func XGMIMatrix(s SMI, hipBusIDs []string) (connectivity.Matrix, []PairLink, error) {
	idx, err := smiIndex(s, hipBusIDs)
	if err != nil {
		return connectivity.Matrix{}, nil, err
	}
	n := len(hipBusIDs)
	m := connectivity.NewMatrix(connectivity.LinkXGMI, n)
	var pairs []PairLink
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			p := PairLink{From: i, To: j}
			p.P2P, err = s.P2PAccessible(idx[i], idx[j])
			if err != nil {
				return connectivity.Matrix{}, nil, fmt.Errorf("HIP devices %d→%d (%s devices %d→%d): %w", i, j, s.Library(), idx[i], idx[j], err)
			}
			if p.P2P {
				p.Hops, p.Type, err = s.Link(idx[i], idx[j])
				var se *SMIError
				switch {
				case err == nil:
				case errors.As(err, &se) && se.NotSupported():
					p.Hops, p.Type = 0, LinkUndefined
				default:
					return connectivity.Matrix{}, nil, fmt.Errorf("HIP devices %d→%d (%s devices %d→%d): %w", i, j, s.Library(), idx[i], idx[j], err)
				}
				if p.Type == LinkXGMI || p.Type == LinkUndefined {
					p.Links = 1
				}
			}
			m.Links[i][j] = p.Links
			pairs = append(pairs, p)
		}
	}
	return m, pairs, nil
}
