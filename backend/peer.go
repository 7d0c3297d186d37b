package backend

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// PeerDetail records how a backend decided whether device From can access
// device To's memory: the answer behind Backend.PeerAccess, as PeerTester
// reports it to `intranode doctor` and to a rendezvous that refuses the
// pair.
type PeerDetail struct {
	// From is the device that accesses; To the device whose memory it
	// accesses.
	From int `json:"from"`
	To   int `json:"to"`
	// CanAccessPeer is the driver's answer to whether the pair can be
	// peers at all (cuDeviceCanAccessPeer, hipDeviceCanAccessPeer).
	CanAccessPeer bool `json:"can_access_peer"`
	// Enabled says peer access was enabled (cuCtxEnablePeerAccess,
	// hipDeviceEnablePeerAccess).
	Enabled bool `json:"enabled"`
	// Verified says a pattern From wrote into To's memory through the peer
	// mapping read back correctly on To, and one written on To read back
	// correctly when From read it through the mapping.
	Verified bool `json:"verified"`
	// Bytes is the size of the test transfer; Elapsed how long the whole
	// write and read-back took.
	Bytes   int           `json:"bytes"`
	Elapsed time.Duration `json:"elapsed"`
	// Reason says why access is not available, when it is not.
	Reason string `json:"reason,omitempty"`
}

// SameDevice is the detail of a device's access to its own memory, which
// needs no test.
func SameDevice(i int) PeerDetail {
	return PeerDetail{From: i, To: i, CanAccessPeer: true, Enabled: true, Verified: true, Reason: "same device"}
}

// PeerTester is implemented by backends whose PeerAccess runs a real check
// and that can say how it decided: what collective and symmetric
// rendezvous quote when they refuse a pair, and what `intranode doctor`
// prints.
type PeerTester interface {
	// PeerTest returns how PeerAccess(i, j) was decided, running the
	// check first if it has not run yet. Its errors are PeerAccess's; a
	// pair without access is a detail with Reason set, not an error.
	PeerTest(ctx context.Context, i, j int) (PeerDetail, error)
}

// PeerDetails keeps the PeerDetail of every pair a backend has tested, for
// backends that implement PeerTester beside a connectivity.PeerCache: the
// cache's query records each detail, PeerTest looks it up. The zero value
// is ready to use; it is safe for concurrent use.
type PeerDetails struct {
	mu sync.Mutex
	m  map[[2]int]PeerDetail
}

// Record stores d as the detail of (d.From, d.To).
func (p *PeerDetails) Record(d PeerDetail) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[2]int]PeerDetail{}
	}
	p.m[[2]int{d.From, d.To}] = d
}

// Lookup returns the detail recorded for (i, j), SameDevice(i) when i == j,
// and the zero detail with From and To set for a pair not tested yet.
func (p *PeerDetails) Lookup(i, j int) PeerDetail {
	if i == j {
		return SameDevice(i)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.m[[2]int{i, j}]; ok {
		return d
	}
	return PeerDetail{From: i, To: j}
}

// PeerTestDiagnostics runs PeerTest for every ordered pair of n distinct
// devices and returns one "peer test i->j" line for each: the doctor lines
// of a backend implementing PeerTester. No access is not a problem here
// (it is normal between unlinked devices); the portable checks of `intranode
// doctor` flag it where links exist.
func PeerTestDiagnostics(ctx context.Context, t PeerTester, n int) []Diagnostic {
	var out []Diagnostic
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			check := fmt.Sprintf("peer test %d->%d", i, j)
			d, err := t.PeerTest(ctx, i, j)
			switch {
			case err != nil:
				out = append(out, Diagnostic{Check: check, Detail: err.Error()})
			case d.Verified:
				out = append(out, Diagnostic{Check: check, OK: true,
					Detail: fmt.Sprintf("wrote and read back %d KiB through the peer mapping in %v", d.Bytes>>10, d.Elapsed.Round(time.Microsecond))})
			default:
				out = append(out, Diagnostic{Check: check, OK: true, Detail: "no peer access: " + d.Reason})
			}
		}
	}
	return out
}

// MappedPeerChecker is implemented by backends whose PeerAccess needs a
// context on the peer's device (CUDA, ROCm): in a process that drives one
// device, that costs about as much as the rest of a rendezvous (130 ms
// and a context's memory per peer on H200). Where it reports true,
// symmetric memory checks peer access through the mappings it makes
// anyway — every rank signals every peer through its mapping of the
// peer's pad and reads a pattern back through it — and does not call
// PeerAccess.
type MappedPeerChecker interface {
	CheckPeersThroughMappings() bool
}
