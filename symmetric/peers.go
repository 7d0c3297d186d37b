package symmetric

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// denial is one peer a rank's device cannot access, and why. Incoming
// turns the pair round: the peer's writes into this rank's memory did not
// arrive.
type denial struct {
	Rank     int    `json:"rank"`
	Reason   string `json:"reason"`
	Incoming bool   `json:"incoming,omitempty"`
}

// denials are a rank's peer-access failures, as it shares them in the
// exchange that closes the rendezvous.
type denials []denial

func (d denials) has(rank int) bool {
	for _, x := range d {
		if x.Rank == rank {
			return true
		}
	}
	return false
}

// encode is the rank's contribution to the closing exchange: nothing when
// every check passed, as the plain barrier it replaces sent.
func (d denials) encode() []byte {
	if len(d) == 0 {
		return nil
	}
	raw, _ := json.Marshal(d)
	return raw
}

// checkPeers asks the backend whether this rank's device can access the
// device of each peer the check covers (WithPeerCheck), skipping peers on
// the same device, and returns the ones it cannot with the reason. A check
// that cannot run counts as a failure, so that every rank still reaches
// the same verdict.
func (b *Block) checkPeers(ctx context.Context, infos []peerInfo, rank int) denials {
	if b.throughMappings() {
		return nil // probeMappings checks once the peers are mapped
	}
	me := infos[rank].Device
	var out denials
	for r, in := range infos {
		if r == rank || in.Device == me || (b.opts.peerCheck != nil && !b.opts.peerCheck(r)) {
			continue
		}
		ok, err := b.be.PeerAccess(ctx, me, in.Device)
		switch {
		case err != nil:
			out = append(out, denial{Rank: r, Reason: "the peer-access check failed: " + err.Error()})
		case !ok:
			out = append(out, denial{Rank: r, Reason: peerReason(ctx, b.be, me, in.Device)})
		}
	}
	if len(out) > 0 {
		b.opts.logger.Debug("symmetric: no peer access", "rank", rank, "device", me, "denied", out)
	}
	return out
}

// peerReason says why device i cannot access device j: the backend's own
// account where it is a backend.PeerTester, else that PeerAccess said no.
func peerReason(ctx context.Context, be backend.Backend, i, j int) string {
	if t, ok := be.(backend.PeerTester); ok {
		d, err := t.PeerTest(ctx, i, j)
		if err == nil && d.Reason != "" {
			return d.Reason
		}
	}
	return fmt.Sprintf("backend %s reports no peer access", be.Name())
}

// peerVerdict reads every rank's denials from the closing exchange and
// returns an error matching ErrPeerAccess naming every failed pair, or nil.
// Every rank reads the same data, so every rank returns the same verdict.
func peerVerdict(all [][]byte, infos []peerInfo) error {
	var pairs []string
	for r, raw := range all {
		if len(raw) == 0 {
			continue
		}
		var d denials
		if err := json.Unmarshal(raw, &d); err != nil {
			return backend.Errorf(backend.CodeInvalidArgument, "symmetric: rank %d sent a malformed peer-access verdict: %v", r, err)
		}
		for _, x := range d {
			if x.Rank < 0 || x.Rank >= len(infos) {
				return backend.Errorf(backend.CodeInvalidArgument, "symmetric: rank %d sent a peer-access verdict about rank %d of %d", r, x.Rank, len(infos))
			}
			from, to := r, x.Rank
			if x.Incoming {
				from, to = x.Rank, r
			}
			pairs = append(pairs, fmt.Sprintf("device %d cannot access device %d (rank %d → rank %d): %s",
				infos[from].Device, infos[to].Device, from, to, x.Reason))
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrPeerAccess, strings.Join(pairs, "; "))
}

// throughMappings reports whether the backend wants peer access checked
// through the rendezvous's own mappings (backend.MappedPeerChecker).
func (b *Block) throughMappings() bool {
	c, ok := b.be.(backend.MappedPeerChecker)
	return ok && c.CheckPeersThroughMappings()
}

// probePattern is what rank r writes into its own pad for peers to read
// back: derived from its nonce, so a stale or foreign pad never passes.
func probePattern(nonce string, r int) []byte {
	a := sha256.Sum256([]byte(nonce + "/" + strconv.Itoa(r)))
	b := sha256.Sum256(a[:])
	return append(a[:], b[:kernels.ProbeSize-len(a)]...)
}

// maxProbeWait bounds the probe's barrier: long enough for ranks that
// reach it at different times, short enough to leave the closing exchange
// time to carry the verdict.
const maxProbeWait = 10 * time.Second

// probeMappings is the peer-access check of backends that want it done
// through the mappings (backend.MappedPeerChecker). Every rank has written
// its pattern into its own pad (probePattern); it then runs a barrier on
// kernels.ProbeChannel, whose signals are stores through each rank's
// mapping of its peers' pads, and reads every checked peer's pattern back
// through its mapping. A peer whose signal does not arrive, or whose
// pattern reads back wrong, is denied with the reason. The probe writes
// its own pattern first; the barrier orders that before any peer's read.
func (m *Memory) probeMappings(ctx context.Context, infos []peerInfo, check func(int) bool) denials {
	wait := min(maxProbeWait, TimeoutFor(ctx, m.opts.timeout)/2)
	bctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// A probe that cannot run denies every peer, so that all ranks refuse.
	denyAll := func(reason string) denials {
		var out denials
		for r := range infos {
			if r != m.rank {
				out = append(out, denial{Rank: r, Reason: reason})
			}
		}
		return out
	}
	if err := m.dev.CopyToDevice(ctx, m.pads[m.rank].Add(kernels.ProbeOffset), probePattern(infos[m.rank].Nonce, m.rank)); err != nil {
		return denyAll("writing the peer-access probe failed: " + err.Error())
	}
	w, err := m.signalStatus(bctx, "peer-access probe", m.fnBar, -1, kernels.ProbeChannel, m.allMask())
	if err != nil {
		return denyAll("the peer-access probe could not run: " + err.Error())
	}
	var out denials
	if code, peer, _ := kernels.DecodeStatus(w); code != kernels.StatusOK {
		reason := fmt.Sprintf("its signal through its mapping of rank %d's pad did not arrive within %v (status %#x)", m.rank, wait, w)
		return denials{{Rank: peer, Reason: reason, Incoming: true}}
	}
	got := make([]byte, kernels.ProbeSize)
	for r, in := range infos {
		if r == m.rank || m.peers[r] == nil || (check != nil && !check(r)) {
			continue
		}
		want := probePattern(in.Nonce, r)
		if err := m.dev.CopyFromDevice(ctx, got, m.pads[r].Add(kernels.ProbeOffset)); err != nil {
			out = append(out, denial{Rank: r, Reason: "reading through the peer mapping failed: " + err.Error()})
			continue
		}
		if !bytes.Equal(got, want) {
			k := 0
			for got[k] == want[k] {
				k++
			}
			out = append(out, denial{Rank: r, Reason: fmt.Sprintf(
				"a read through the peer mapping gave %#02x at byte %d of the probe, want %#02x", got[k], k, want[k])})
		}
	}
	return out
}
