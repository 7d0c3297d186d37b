package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
)

// Core is the backend-level state the CUDA and ROCm backends share: the
// device table, open-device counts, the peer-access checks and their
// details, and the fabric-handle verdicts. A vendor Backend embeds it and
// so offers DeviceCount, DeviceInfo, Open, PeerAccess, PeerTest,
// PeerAccessMatrix, FabricSupported and FabricReason. It is safe for
// concurrent use.
type Core struct {
	v   Vendor
	log *slog.Logger
	// err says why the runtime cannot be used (it matches
	// backend.ErrUnavailable); nil when it can.
	err   error
	infos []backend.DeviceInfo

	mu      sync.Mutex
	closed  bool
	opened  []int    // open Device handles per device
	canPeer [][]int8 // CanAccessPeer answers: 0 unknown, 1 yes, -1 no

	details backend.PeerDetails
	peers   *connectivity.PeerCache

	fabricMu     sync.Mutex
	fabric       []connectivity.Access
	fabricReason []string

	// builtins holds each device's built-in kernel module, loaded once and
	// shared by every handle of the device (they share its primary
	// context), so that a process's second comm on a device does not load
	// it again.
	builtinMu sync.Mutex
	builtins  map[int]*builtinModule
}

// Init readies c for v's devices, described by infos; initErr, when set,
// is what every method returns.
func (c *Core) Init(v Vendor, log *slog.Logger, initErr error, infos []backend.DeviceInfo) {
	n := len(infos)
	c.v, c.log, c.err, c.infos = v, log, initErr, infos
	c.opened = make([]int, n)
	c.canPeer = make([][]int8, n)
	for i := range c.canPeer {
		c.canPeer[i] = make([]int8, n)
	}
	c.fabric = make([]connectivity.Access, n)
	c.fabricReason = make([]string, n)
	c.peers = connectivity.NewPeerCache(n, c.queryPeer, nil)
}

// Log is the backend's logger.
func (c *Core) Log() *slog.Logger { return c.log }

// Usable returns the error every method returns before doing anything:
// closed backend, unusable runtime, done context, device index out of
// range.
func (c *Core) Usable(ctx context.Context, devs ...int) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return backend.Errorf(backend.CodeClosed, "%s: backend is closed", c.v.Name())
	}
	if c.err != nil {
		return c.err
	}
	if err := ctx.Err(); err != nil {
		return backend.Errorf(backend.CodeTimeout, "%s: %w", c.v.Name(), err)
	}
	for _, i := range devs {
		if i < 0 || i >= len(c.infos) {
			return backend.Errorf(backend.CodeInvalidArgument, "%s: device %d out of range [0,%d)", c.v.Name(), i, len(c.infos))
		}
	}
	return nil
}

// MarkClosed makes every later call fail with backend.ErrClosed; it
// reports whether this call closed the core (false: already closed).
func (c *Core) MarkClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	return true
}

// Closed reports whether MarkClosed has run.
func (c *Core) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// BusIDs lists the devices' PCI bus ids in index order.
func (c *Core) BusIDs() []string {
	ids := make([]string, len(c.infos))
	for i, d := range c.infos {
		ids[i] = d.PCIBusID
	}
	return ids
}

// DeviceCount is the number of devices the runtime sees.
func (c *Core) DeviceCount(ctx context.Context) (int, error) {
	if err := c.Usable(ctx); err != nil {
		return 0, err
	}
	return len(c.infos), nil
}

// DeviceInfo describes device i, as the runtime reports it.
func (c *Core) DeviceInfo(ctx context.Context, i int) (backend.DeviceInfo, error) {
	if err := c.Usable(ctx, i); err != nil {
		return backend.DeviceInfo{}, err
	}
	return c.infos[i], nil
}

// Open returns a handle on device i.
func (c *Core) Open(ctx context.Context, i int) (backend.Device, error) {
	if err := c.Usable(ctx, i); err != nil {
		return nil, err
	}
	return c.openDevice(i)
}

// canAccessPeer answers the driver's can-access-peer query, cached.
func (c *Core) canAccessPeer(i, j int) (bool, error) {
	c.mu.Lock()
	st := c.canPeer[i][j]
	c.mu.Unlock()
	if st != 0 {
		return st > 0, nil
	}
	ok, err := c.v.CanAccessPeer(i, j)
	if err != nil {
		return false, Wrap(err, "%s: %s(%d, %d)", c.v.Name(), c.v.PeerQuery(), i, j)
	}
	st = -1
	if ok {
		st = 1
	}
	c.mu.Lock()
	c.canPeer[i][j] = st
	c.mu.Unlock()
	return ok, nil
}

// AccessDevices lists the devices granted access to device i's
// shareable allocations: i itself and every device this process has open
// (through this backend) that can reach i's memory as a peer, so that
// ranks running as goroutines of one process may use the memory without
// importing it. A process that drives one GPU grants only that GPU; its
// peers get access when they Import.
func (c *Core) AccessDevices(i int) ([]int, error) {
	c.mu.Lock()
	open := slices.Clone(c.opened)
	c.mu.Unlock()
	devs := []int{i}
	for p, n := range open {
		if p == i || n == 0 {
			continue
		}
		ok, err := c.canAccessPeer(p, i)
		if err != nil {
			return nil, err
		}
		if ok {
			devs = append(devs, p)
		}
	}
	return devs, nil
}

func (c *Core) countOpen(i, delta int) {
	c.mu.Lock()
	c.opened[i] += delta
	c.mu.Unlock()
}

// FabricSupported reports whether device i can share memory through
// opaque handles (backend.HandleFabric), as the vendor's check says. The
// answer is cached.
func (c *Core) FabricSupported(ctx context.Context, i int) (bool, error) {
	if err := c.Usable(ctx, i); err != nil {
		return false, err
	}
	c.fabricMu.Lock()
	defer c.fabricMu.Unlock()
	switch c.fabric[i] {
	case connectivity.AccessYes:
		return true, nil
	case connectivity.AccessNo:
		return false, nil
	}
	ok, reason, err := c.v.CheckFabric(i)
	if err != nil {
		return false, err
	}
	c.fabric[i] = connectivity.AccessNo
	if ok {
		c.fabric[i] = connectivity.AccessYes
	}
	c.fabricReason[i] = reason
	c.log.Debug(c.v.Name()+": fabric handles", "device", i, "supported", ok, "reason", reason)
	return ok, nil
}

// FabricReason says why FabricSupported(i) answered no, once it has run;
// "" otherwise.
func (c *Core) FabricReason(i int) string {
	c.fabricMu.Lock()
	defer c.fabricMu.Unlock()
	if i < 0 || i >= len(c.fabricReason) {
		return ""
	}
	return c.fabricReason[i]
}

// PeerAccess reports whether device i can read and write device j's
// memory: the driver must say it can, peer access is then enabled (once)
// and a real write and read-back through the peer mapping must succeed.
// The answer is cached per pair.
func (c *Core) PeerAccess(ctx context.Context, i, j int) (bool, error) {
	if err := c.Usable(ctx, i, j); err != nil {
		return false, err
	}
	ok, err := c.peers.Get(i, j)
	if err != nil {
		return false, fmt.Errorf("%s: %w", c.v.Name(), err)
	}
	return ok, nil
}

// PeerState is the cached verdict on the pair (i, j), without checking:
// connectivity.AccessUnknown until PeerAccess has decided it.
func (c *Core) PeerState(i, j int) connectivity.Access { return c.peers.State(i, j) }

// PeerTest returns how PeerAccess(i, j) was decided, running the check
// first if it has not run yet (backend.PeerTester).
func (c *Core) PeerTest(ctx context.Context, i, j int) (backend.PeerDetail, error) {
	if _, err := c.PeerAccess(ctx, i, j); err != nil {
		return backend.PeerDetail{}, err
	}
	return c.details.Lookup(i, j), nil
}

// PeerAccessMatrix runs PeerAccess for every ordered pair and returns the
// answers; a convenience for doctor output.
func (c *Core) PeerAccessMatrix(ctx context.Context) ([][]bool, error) {
	if err := c.Usable(ctx); err != nil {
		return nil, err
	}
	n := len(c.infos)
	out := make([][]bool, n)
	for i := range n {
		out[i] = make([]bool, n)
		for j := range n {
			ok, err := c.PeerAccess(ctx, i, j)
			if err != nil {
				return nil, err
			}
			out[i][j] = ok
		}
	}
	return out, nil
}

// peerTestBytes is how much the peer-access check writes and reads back.
const peerTestBytes = 256 << 10

// Bytes the peer-access check writes through the peer mapping and reads
// back through it.
const (
	peerWritePattern = 0xa5
	peerReadPattern  = 0x5a
)

// queryPeer is the PeerCache query: it enables access itself because the
// check needs the peer mapping, so the cache gets no enable callback.
// Errors (the check could not run) are not cached; a refused enable, a
// failed transfer or a wrong read-back is a cached "no".
func (c *Core) queryPeer(i, j int) (bool, error) {
	name := c.v.Name()
	d := backend.PeerDetail{From: i, To: j, Bytes: peerTestBytes}
	can, err := c.canAccessPeer(i, j)
	if err != nil {
		return false, err
	}
	d.CanAccessPeer = can
	if !can {
		d.Reason = c.v.PeerQuery() + " says no"
		c.details.Record(d)
		return false, nil
	}
	if err := c.v.EnablePeer(i, j); err != nil {
		if errors.Is(err, backend.ErrClosed) {
			return false, err
		}
		d.Reason = err.Error()
		c.details.Record(d)
		c.log.Debug(name+": enabling peer access failed", "from", i, "to", j, "error", err)
		return false, nil
	}
	d.Enabled = true
	start := time.Now()
	reason, err := c.peerTransfer(i, j)
	if err != nil {
		return false, err
	}
	d.Elapsed = time.Since(start)
	d.Verified = reason == ""
	d.Reason = reason
	c.details.Record(d)
	c.log.Debug(name+": peer access", "from", i, "to", j, "verified", d.Verified, "reason", reason, "elapsed", d.Elapsed)
	return d.Verified, nil
}

// peerTransfer has device i copy a pattern into memory on j, read back on
// j, then copy a pattern written on j into its own memory. It returns why
// the check failed ("" when it passed), or an error when it could not run.
func (c *Core) peerTransfer(i, j int) (string, error) {
	v, name := c.v, c.v.Name()
	ci, err := v.Context(i)
	if err != nil {
		return "", err
	}
	cj, err := v.Context(j)
	if err != nil {
		return "", err
	}
	remote, err := v.Malloc(cj, peerTestBytes)
	if err != nil {
		return "", Wrap(err, "%s: peer check %d→%d: allocating on device %d", name, i, j, j)
	}
	defer func() { _ = v.Free(cj, remote) }()
	local, err := v.Malloc(ci, peerTestBytes)
	if err != nil {
		return "", Wrap(err, "%s: peer check %d→%d: allocating on device %d", name, i, j, i)
	}
	defer func() { _ = v.Free(ci, local) }()
	host := make([]byte, peerTestBytes)
	// Write: device i copies into j's memory, read back on j. Read: device
	// i copies j's memory into its own, read back on i.
	type end struct {
		ctx Ctx
		ptr backend.DevicePtr
		dev int
	}
	onI, onJ := end{ci, local, i}, end{cj, remote, j}
	for _, step := range []struct {
		from, to     end // the copy's source and destination (device i runs it)
		pattern      byte
		failed, came string
	}{
		{onI, onJ, peerWritePattern, fmt.Sprintf("write from device %d to device %d", i, j),
			fmt.Sprintf("write from device %d read back wrong on device %d", i, j)},
		{onJ, onI, peerReadPattern, fmt.Sprintf("read by device %d from device %d", i, j),
			fmt.Sprintf("read by device %d from device %d came back wrong", i, j)},
	} {
		if err := v.Memset(step.from.ctx, step.from.ptr, step.pattern, peerTestBytes); err != nil {
			return "", Wrap(err, "%s: peer check %d→%d: filling device %d", name, i, j, step.from.dev)
		}
		if err := v.CopyDtoD(ci, step.to.ptr, step.from.ptr, peerTestBytes); err != nil {
			return fmt.Sprintf("%s failed: %v", step.failed, err), nil
		}
		if err := v.CopyDtoH(step.to.ctx, host, step.to.ptr); err != nil {
			return "", Wrap(err, "%s: peer check %d→%d: reading device %d", name, i, j, step.to.dev)
		}
		if k := firstMismatch(host, step.pattern); k >= 0 {
			return fmt.Sprintf("%s at byte %d", step.came, k), nil
		}
	}
	return "", nil
}

// firstMismatch returns the index of the first byte of b that is not v, or
// -1.
func firstMismatch(b []byte, v byte) int {
	for k, x := range b {
		if x != v {
			return k
		}
	}
	return -1
}

var _ backend.PeerTester = (*Core)(nil)

// Register adds a GPU backend that takes no argument to the backend
// registry: open is called for backend.Open(ctx, name).
func Register[B backend.Backend](name string, priority int, open func(context.Context) (B, error)) {
	backend.Register(backend.Driver{
		Name:     name,
		Priority: priority,
		Open: func(ctx context.Context, arg string) (backend.Backend, error) {
			if arg != "" {
				return nil, backend.Errorf(backend.CodeInvalidArgument, "%s: the backend takes no argument (got %q)", name, arg)
			}
			return open(ctx)
		},
	})
}
