package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/connectivity"
)

func init() {
	register(
		Case{Name: "connectivity/matrix", Single: true, Run: caseMatrix},
		Case{Name: "connectivity/peer-access", Single: true, Run: casePeerAccess},
		Case{Name: "rendezvous/success", MinWorld: 2, Run: caseRendezvousSuccess},
		Case{Name: "rendezvous/idempotent", MinWorld: 2, Run: caseRendezvousIdempotent},
		Case{Name: "rendezvous/two-comms", MinWorld: 2, Run: caseTwoComms},
		Case{Name: "rendezvous/refuse-world-size", Single: true, Run: caseRefuseWorldSize},
		Case{Name: "rendezvous/refuse-not-supported", Single: true, Run: caseRefuseNotSupported},
		Case{Name: "rendezvous/refuse-host-mismatch", MinWorld: 2, Run: caseRefuseHostMismatch},
		Case{Name: "rendezvous/refuse-overlapping-devices", MinWorld: 2, Run: caseRefuseOverlap},
		Case{Name: "rendezvous/refuse-topology", MinWorld: 2, Run: caseRefuseTopology},
		Case{Name: "rendezvous/refuse-broken-p2p", MinWorld: 2, Run: caseRefuseBrokenP2P},
	)
}

func caseMatrix(ctx context.Context, e *Env) error {
	b := e.Backend
	n, err := b.DeviceCount(ctx)
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("backend reports %d devices", n)
	}
	m, err := b.LinkMatrix(ctx)
	if err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Size() != n {
		return fmt.Errorf("link matrix is %d×%d but there are %d devices", m.Size(), m.Size(), n)
	}
	if m.Kind != connectivity.LinkNVLink && !m.Symmetric() {
		return fmt.Errorf("%s link matrix is not symmetric", m.Kind)
	}
	for i := range n {
		info, err := b.DeviceInfo(ctx, i)
		if err != nil {
			return err
		}
		if info.Index != i || info.Name == "" {
			return fmt.Errorf("device %d: info %+v", i, info)
		}
	}
	if _, err := b.DeviceInfo(ctx, n); !errors.Is(err, backend.ErrInvalidArgument) {
		return fmt.Errorf("DeviceInfo(%d) of %d devices: got %v, want ErrInvalidArgument", n, n, err)
	}
	return nil
}

func casePeerAccess(ctx context.Context, e *Env) error {
	b := e.Backend
	n, err := b.DeviceCount(ctx)
	if err != nil {
		return err
	}
	m, err := b.LinkMatrix(ctx)
	if err != nil {
		return err
	}
	for i := range n {
		ok, err := b.PeerAccess(ctx, i, i)
		if err != nil || !ok {
			return fmt.Errorf("PeerAccess(%d,%d) = %v, %v; the diagonal must be true", i, i, ok, err)
		}
	}
	// A group the topology detection calls usable must have peer access
	// between every pair it would use, unless the backend's own test failed
	// and says why (backend.PeerTester): rendezvous then refuses the pair
	// (rendezvous/refuse-broken-p2p).
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if connectivity.Detect(m) == connectivity.FullyConnected {
		for i := range n {
			for j := range n {
				ok, err := b.PeerAccess(ctx, i, j)
				if err != nil {
					return err
				}
				if !ok && !explained(ctx, b, i, j) {
					return fmt.Errorf("topology is fully connected but PeerAccess(%d,%d) is false", i, j)
				}
			}
		}
	}
	// Answers are cached: asking again gives the same.
	for i := range n {
		for j := range n {
			a, err1 := b.PeerAccess(ctx, i, j)
			c, err2 := b.PeerAccess(ctx, i, j)
			if err1 != nil || err2 != nil || a != c {
				return fmt.Errorf("PeerAccess(%d,%d) changed between calls: %v/%v %v/%v", i, j, a, err1, c, err2)
			}
		}
	}
	if _, err := b.PeerAccess(ctx, 0, n); err == nil {
		return fmt.Errorf("PeerAccess(0,%d) of %d devices: want an error", n, n)
	}
	return nil
}

// explained reports whether the backend says why device i has no peer
// access to device j (a failed real test, backend.PeerTester).
func explained(ctx context.Context, b backend.Backend, i, j int) bool {
	t, ok := b.(backend.PeerTester)
	if !ok {
		return false
	}
	d, err := t.PeerTest(ctx, i, j)
	return err == nil && !d.Verified && d.Reason != ""
}

func caseRendezvousSuccess(ctx context.Context, e *Env) error {
	c, err := newComm(ctx, e, 1<<20)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(c.Name(), "IntraNodeComm") {
		return fmt.Errorf("group name %q", c.Name())
	}
	if c.Topology() == connectivity.Unknown {
		return fmt.Errorf("rendezvous succeeded with topology Unknown")
	}
	if c.BufferSize() != 1<<20 {
		return fmt.Errorf("buffer size %d", c.BufferSize())
	}
	return closeComm(ctx, c)
}

func caseRendezvousIdempotent(ctx context.Context, e *Env) error {
	c, err := newComm(ctx, e, 1<<20)
	if err != nil {
		return err
	}
	name := c.Name()
	if err := c.Rendezvous(ctx); err != nil {
		return fmt.Errorf("second rendezvous: %w", err)
	}
	if c.Name() != name {
		return fmt.Errorf("second rendezvous renamed the group %q -> %q", name, c.Name())
	}
	return closeComm(ctx, c)
}

func caseTwoComms(ctx context.Context, e *Env) error {
	a, err := newComm(ctx, e, 256<<10)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := newComm(ctx, e, 128<<10)
	if err != nil {
		return err
	}
	defer b.Close()
	if a.Name() == b.Name() {
		return fmt.Errorf("two comms share the name %q", a.Name())
	}
	for i, c := range []*collective.Comm{a, b, a} {
		if err := allReduceOnce(ctx, e, c, collective.OneShot, backend.Float32, backend.Sum, 1000, 17+i, false); err != nil {
			return fmt.Errorf("comm %s: %w", c.Name(), err)
		}
	}
	return errors.Join(closeComm(ctx, a), closeComm(ctx, b))
}

func expectRefusal(ctx context.Context, c *collective.Comm, want error) error {
	defer c.Close()
	err := c.Rendezvous(ctx)
	if !errors.Is(err, want) {
		return fmt.Errorf("rendezvous: got %v, want %v", err, want)
	}
	if c.SelectAllReduceAlgo(1, backend.Float32) != collective.None {
		return fmt.Errorf("a refused comm selects an algorithm")
	}
	return nil
}

func caseRefuseWorldSize(ctx context.Context, e *Env) error {
	for _, world := range []int{1, collective.MaxDevices + 1} {
		c, err := collective.New(e.Store, 0, world, collective.Options{Backend: e.Backend, Timeout: e.Timeout})
		if err != nil {
			return err
		}
		if err := expectRefusal(ctx, c, collective.ErrWorldSize); err != nil {
			return fmt.Errorf("world %d: %w", world, err)
		}
	}
	return nil
}

// unprobeable is a backend whose Probe fails, as on a machine without the
// hardware.
type unprobeable struct{ backend.Backend }

func (unprobeable) Probe(context.Context) error {
	return backend.Errorf(backend.CodeUnavailable, "conformance: simulated missing hardware")
}

func caseRefuseNotSupported(ctx context.Context, e *Env) error {
	c, err := collective.New(e.Store, 0, 2, collective.Options{Backend: unprobeable{e.Backend}, Timeout: e.Timeout})
	if err != nil {
		return err
	}
	return expectRefusal(ctx, c, collective.ErrNotSupported)
}

func caseRefuseHostMismatch(ctx context.Context, e *Env) error {
	opts, err := commOptions(ctx, e, 1<<20)
	if err != nil {
		return err
	}
	opts.Hostname = "host-a"
	if e.Rank == e.World-1 {
		opts.Hostname = "host-b"
	}
	c, err := collective.New(e.Store, e.Rank, e.World, opts)
	if err != nil {
		return err
	}
	return expectRefusal(ctx, c, collective.ErrHostMismatch)
}

func caseRefuseOverlap(ctx context.Context, e *Env) error {
	opts, err := commOptions(ctx, e, 1<<20)
	if err != nil {
		return err
	}
	zero := 0
	opts.Device, opts.AllowOverlap = &zero, false
	c, err := collective.New(e.Store, e.Rank, e.World, opts)
	if err != nil {
		return err
	}
	return expectRefusal(ctx, c, collective.ErrOverlappingDevices)
}

func caseRefuseTopology(ctx context.Context, e *Env) error {
	if connectivity.ForcedFullyConnected() {
		return Skip("%s=1 forces every topology to FullyConnected", connectivity.EnvForceFullyConnected)
	}
	m, err := e.Backend.LinkMatrix(ctx)
	if err != nil {
		return err
	}
	devs := unusableGroup(m, e.World)
	if devs == nil {
		return Skip("every group of %d devices on this backend is usable", e.World)
	}
	opts, err := commOptions(ctx, e, 1<<20)
	if err != nil && !errors.As(err, new(skipError)) {
		return err
	}
	dev := devs[e.Rank]
	opts.Backend, opts.Device, opts.AllowOverlap, opts.Timeout = e.Backend, &dev, false, e.Timeout
	c, err := collective.New(e.Store, e.Rank, e.World, opts)
	if err != nil {
		return err
	}
	return expectRefusal(ctx, c, collective.ErrTopology)
}

// unusableGroup finds world distinct devices whose topology is Unknown, in
// a deterministic order so every rank picks the same ones.
func unusableGroup(m connectivity.Matrix, world int) []int {
	n := m.Size()
	var pick func(start int, cur []int) []int
	pick = func(start int, cur []int) []int {
		if len(cur) == world {
			sub, err := m.Sub(cur)
			if err == nil && connectivity.Detect(sub) == connectivity.Unknown {
				return append([]int(nil), cur...)
			}
			return nil
		}
		for d := start; d < n; d++ {
			if got := pick(d+1, append(cur, d)); got != nil {
				return got
			}
		}
		return nil
	}
	return pick(0, nil)
}

// caseRefuseBrokenP2P rendezvouses on devices whose links make a usable
// topology but one of whose linked pairs fails the backend's peer-access
// test: every rank must refuse with ErrTopology, naming the pair and (for a
// backend.PeerTester) the backend's reason. A group without such a pair
// must then still work. The fake arranges a broken pair with
// INTRANODE_FAKE_BROKEN_P2P; elsewhere the case runs only where the
// hardware has one.
func caseRefuseBrokenP2P(ctx context.Context, e *Env) error {
	n, err := e.Backend.DeviceCount(ctx)
	if err != nil {
		return err
	}
	if n < e.World {
		return Skip("world %d exceeds the %d devices", e.World, n)
	}
	m, err := e.Backend.LinkMatrix(ctx)
	if err != nil {
		return err
	}
	devs, pair, err := brokenGroup(ctx, e.Backend, m, e.World, true)
	if err != nil {
		return err
	}
	if devs == nil {
		return Skip("no %d devices the topology accepts include a linked pair whose peer-access test fails "+
			"(the fake arranges one with INTRANODE_FAKE_BROKEN_P2P=0-1)", e.World)
	}
	want := fmt.Sprintf("device %d cannot access device %d", pair[0], pair[1])
	if t, ok := e.Backend.(backend.PeerTester); ok {
		d, err := t.PeerTest(ctx, pair[0], pair[1])
		if err != nil {
			return fmt.Errorf("PeerTest(%d,%d): %w", pair[0], pair[1], err)
		}
		if d.Verified || d.Reason == "" {
			return fmt.Errorf("PeerAccess(%d,%d) is false but PeerTest says %+v", pair[0], pair[1], d)
		}
		want += fmt.Sprintf(" (rank %d → rank %d): %s", slices.Index(devs, pair[0]), slices.Index(devs, pair[1]), d.Reason)
	}
	dev := devs[e.Rank]
	opts := collective.Options{Backend: e.Backend, Device: &dev, BufferSize: 1 << 20, Timeout: e.Timeout}
	c, err := collective.New(e.Store, e.Rank, e.World, opts)
	if err != nil {
		return err
	}
	err = c.Rendezvous(ctx)
	algo := c.SelectAllReduceAlgo(1, backend.Float32)
	if cerr := c.Close(); cerr != nil {
		return cerr
	}
	switch {
	case !errors.Is(err, collective.ErrTopology):
		return fmt.Errorf("devices %v, pair %d→%d without peer access: rendezvous: got %v, want %v", devs, pair[0], pair[1], err, collective.ErrTopology)
	case !strings.Contains(err.Error(), want):
		return fmt.Errorf("devices %v: refusal %q does not name %q", devs, err, want)
	case algo != collective.None:
		return fmt.Errorf("a refused comm selects %v", algo)
	}

	// The backend still serves a group without a failing pair.
	clean, _, err := brokenGroup(ctx, e.Backend, m, e.World, false)
	if err != nil || clean == nil {
		return err
	}
	dev = clean[e.Rank]
	if c, err = collective.New(e.Store, e.Rank, e.World, opts); err != nil {
		return err
	}
	if err := c.Rendezvous(ctx); err != nil {
		_ = c.Close()
		return fmt.Errorf("devices %v, which pass every peer-access test: %w", clean, err)
	}
	if err := allReduceOnce(ctx, e, c, collective.OneShot, backend.Float32, backend.Sum, 1000, 11, false); err != nil {
		_ = c.Close()
		return fmt.Errorf("devices %v: %w", clean, err)
	}
	return closeComm(ctx, c)
}

// brokenGroup finds, in a deterministic order so that every rank picks the
// same, world distinct devices whose topology is usable and that include
// (broken) or do not include (!broken) a linked pair without peer access;
// for broken it also returns the first such pair. It returns nil when there
// is none.
func brokenGroup(ctx context.Context, b backend.Backend, m connectivity.Matrix, world int, broken bool) ([]int, [2]int, error) {
	var found []int
	var pair [2]int
	var qerr error
	var pick func(start int, cur []int) bool
	pick = func(start int, cur []int) bool {
		if len(cur) == world {
			sub, err := m.Sub(cur)
			if err != nil || connectivity.Detect(sub) == connectivity.Unknown {
				return false
			}
			p, ok, err := failingPair(ctx, b, m, cur)
			if err != nil {
				qerr = err
				return true
			}
			if ok == broken {
				found, pair = slices.Clone(cur), p
				return true
			}
			return false
		}
		for d := start; d < m.Size(); d++ {
			if pick(d+1, append(cur, d)) {
				return true
			}
		}
		return false
	}
	pick(0, nil)
	return found, pair, qerr
}

// failingPair returns the first ordered pair of devs that is linked but
// has no peer access.
func failingPair(ctx context.Context, b backend.Backend, m connectivity.Matrix, devs []int) ([2]int, bool, error) {
	for _, i := range devs {
		for _, j := range devs {
			if i == j || m.At(i, j) == 0 {
				continue
			}
			ok, err := b.PeerAccess(ctx, i, j)
			if err != nil {
				return [2]int{}, false, err
			}
			if !ok {
				return [2]int{i, j}, true, nil
			}
		}
	}
	return [2]int{}, false, nil
}
