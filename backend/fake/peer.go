package fake

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/intranode/intranode/backend"
)

// peerWritePattern is the byte a real backend's peer-access test writes
// through the peer mapping (the CUDA and ROCm backends use the same).
const peerWritePattern = 0xa5

var _ backend.PeerTester = (*Backend)(nil)

// PeerTest says how PeerAccess(i, j) is decided: a linked pair verifies, an
// unlinked one is refused as the driver would refuse it (CanAccessPeer
// false), and a broken pair (WithBrokenP2P, EnvBrokenP2P) fails as a real
// test whose writes through the peer mapping never land. The fake moves no
// data for it, so Bytes and Elapsed are zero.
func (b *Backend) PeerTest(ctx context.Context, i, j int) (backend.PeerDetail, error) {
	if _, err := b.PeerAccess(ctx, i, j); err != nil {
		return backend.PeerDetail{}, err
	}
	return b.peerDetail(i, j), nil
}

// peerDetail decides the pair (i, j), both in range; it is also the peer
// cache's query.
func (b *Backend) peerDetail(i, j int) backend.PeerDetail {
	if i == j {
		return backend.SameDevice(i)
	}
	d := backend.PeerDetail{From: i, To: j}
	switch {
	case b.matrix.At(i, j) == 0:
		d.Reason = fmt.Sprintf("devices %d and %d are not linked in the fake's %q topology", i, j, b.cfg.preset)
	case b.cfg.broken[[2]int{i, j}]:
		d.CanAccessPeer, d.Enabled = true, true
		d.Reason = fmt.Sprintf("write through the peer mapping read back 0x00 at byte 0, want 0x%02x (%s)", peerWritePattern, b.cfg.brokenBy)
	default:
		d.CanAccessPeer, d.Enabled, d.Verified = true, true, true
	}
	return d
}

// ParseBrokenP2P parses EnvBrokenP2P's syntax: comma-separated pairs, "I-J"
// for both directions of devices I and J, "I>J" for device I's access to
// device J only. It returns ordered {from, to} pairs for WithBrokenP2P.
func ParseBrokenP2P(s string) ([][2]int, error) {
	var out [][2]int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		sep, both := ">", false
		if strings.Contains(item, "-") {
			sep, both = "-", true
		}
		a, c, ok := strings.Cut(item, sep)
		i, err1 := strconv.Atoi(strings.TrimSpace(a))
		j, err2 := strconv.Atoi(strings.TrimSpace(c))
		if !ok || err1 != nil || err2 != nil || i < 0 || j < 0 {
			return nil, fmt.Errorf("pair %q: want I-J (both directions) or I>J (I's access to J), device numbers", item)
		}
		if i == j {
			return nil, fmt.Errorf("pair %q: a device always reaches its own memory", item)
		}
		out = append(out, [2]int{i, j})
		if both {
			out = append(out, [2]int{j, i})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pairs")
	}
	return out, nil
}
