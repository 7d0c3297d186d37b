package symmetric

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/phases"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric/ipc"
	"github.com/intranode/intranode/symmetric/store"
)

// DefaultTimeout bounds device-side waits (barriers, signals) when the
// caller's context has no deadline.
const DefaultTimeout = 60 * time.Second

// Sentinel errors of the rendezvous, for errors.Is.
var (
	// ErrSizeMismatch: ranks allocated different buffer sizes.
	ErrSizeMismatch = errors.New("symmetric: ranks allocated different sizes")
	// ErrHostMismatch: ranks are on different hosts.
	ErrHostMismatch = errors.New("symmetric: ranks are on different hosts")
	// ErrOverlappingDevices: two ranks selected the same device.
	ErrOverlappingDevices = errors.New("symmetric: ranks share a device")
	// ErrPeerAccess: a rank's device cannot access a peer's device's
	// memory (Backend.PeerAccess said no); the message names each failed
	// pair and, where the backend is a backend.PeerTester, why.
	ErrPeerAccess = errors.New("symmetric: peer access failed")
)

type options struct {
	allowOverlap bool
	timeout      time.Duration
	logger       *slog.Logger
	hostname     string
	peerCheck    func(peer int) bool
}

// Option configures Alloc and Rendezvous.
type Option func(*options)

// WithAllowOverlap lets several ranks use one device (the reference's
// overlapping-devices switch). Real GPUs only support it for testing.
func WithAllowOverlap(allow bool) Option { return func(o *options) { o.allowOverlap = allow } }

// WithTimeout sets the bound on device-side waits used when a call's context
// has no deadline.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithHostname overrides the host name a rank reports in the rendezvous
// (tests simulate several hosts with it).
func WithHostname(h string) Option { return func(o *options) { o.hostname = h } }

// WithPeerCheck limits Rendezvous's peer-access check to the peer ranks
// for which check reports true: the ranks whose memory this rank's kernels
// reach (collective's hybrid cube mesh reads only its linked neighbours).
// By default, or with a nil check, every peer is checked. Ranks on this
// rank's own device are never checked.
func WithPeerCheck(check func(peer int) bool) Option { return func(o *options) { o.peerCheck = check } }

func buildOptions(opts []Option) options {
	o := options{timeout: DefaultTimeout, logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	if o.hostname == "" {
		o.hostname, _ = os.Hostname()
	}
	return o
}

// Block is one rank's local share of a symmetric allocation before the
// group has rendezvoused: a shareable device allocation holding the buffer
// followed by the signal pad.
type Block struct {
	be      backend.Backend // dev's backend, for the peer-access check
	dev     backend.Device
	caps    backend.Capability
	fabric  bool
	size    int // usable buffer bytes, as requested
	bufSpan int // buffer bytes rounded so the pad is aligned
	alloc   backend.Allocation
	opts    options
}

// Alloc allocates this rank's block of a symmetric allocation: size buffer
// bytes plus a zeroed signal pad of kernels.SignalPadSize bytes. b is the
// backend dev came from; it decides how the block is shared.
func Alloc(ctx context.Context, b backend.Backend, dev backend.Device, size int, opts ...Option) (*Block, error) {
	if size <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "symmetric: buffer size %d must be positive", size)
	}
	o := buildOptions(opts)
	caps := b.Capabilities()
	kind := backend.HandleFD
	fabric := false
	if caps.Has(backend.CapHandleFabric) {
		ok, err := b.FabricSupported(ctx, dev.Index())
		if err == nil && ok {
			kind, fabric = backend.HandleFabric, true
		}
	}
	span := alignUp(size, 256)
	a, err := dev.AllocShareable(ctx, span+kernels.SignalPadSize, kind)
	if err != nil {
		return nil, fmt.Errorf("symmetric: allocating %d bytes on device %d: %w", size, dev.Index(), err)
	}
	return &Block{be: b, dev: dev, caps: caps, fabric: fabric, size: size, bufSpan: span, alloc: a, opts: o}, nil
}

// Ptr is the local buffer's address.
func (b *Block) Ptr() backend.DevicePtr { return b.alloc.Ptr() }

// Size is the buffer size requested.
func (b *Block) Size() int { return b.size }

// Close frees a block that never rendezvoused.
func (b *Block) Close() error { return b.alloc.Close() }

// peerInfo is what ranks exchange first. JSON keeps it readable in stores.
type peerInfo struct {
	Host   string `json:"host"`
	Device int    `json:"device"`
	PID    int    `json:"pid"`
	Size   int    `json:"size"`
	Span   int    `json:"span"`
	Fabric bool   `json:"fabric"`
	Nonce  string `json:"nonce"`
}

// Rendezvous exchanges and maps every rank's block so that each rank can
// address every peer's buffer and signal pad. It is collective: every rank
// of the group calls it with the same group name. The block belongs to the
// returned Memory afterwards (or is freed on error).
//
// Once the first exchange has named every rank's device, each rank asks
// the backend whether its device can access each peer's (PeerAccess, see
// WithPeerCheck) and does not map the peers it cannot reach. The answers
// travel in the exchange that closes the rendezvous, so every rank
// returns the same verdict: an error matching ErrPeerAccess that names
// every failed pair, or success.
func (b *Block) Rendezvous(ctx context.Context, name string, g GroupInfo) (m *Memory, err error) {
	defer func() {
		if err != nil {
			_ = b.alloc.Close()
		}
	}()
	if g.World < 1 || g.World > kernels.MaxRanks || g.Rank < 0 || g.Rank >= g.World {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "symmetric: rank %d of world %d (max %d)", g.Rank, g.World, kernels.MaxRanks)
	}
	tm := phases.Start()
	defer func() {
		if err == nil {
			b.opts.logger.Debug("symmetric rendezvous phases", tm.Attrs()...)
		}
	}()
	// The kernel module needs no peer: it loads on its own goroutine from
	// here, beside the exchanges and the mapping, instead of after them
	// (the CUDA image takes tens of milliseconds, the largest phase at
	// world 4: docs/PERFORMANCE.md).
	module := startModuleLoad(ctx, b.dev)
	defer module.release()
	ex, err := store.NewExchange(g.Store, "symm/"+name, g.Rank, g.World)
	if err != nil {
		return nil, fmt.Errorf("symmetric: %w", err)
	}
	defer ex.Close(ctx)
	nonce, err := ipc.NewNonce()
	if err != nil {
		return nil, fmt.Errorf("symmetric: %w", err)
	}
	me := peerInfo{Host: b.opts.hostname, Device: b.dev.Index(), PID: os.Getpid(), Size: b.size,
		Span: b.bufSpan, Fabric: b.fabric, Nonce: nonce}
	raw, _ := json.Marshal(me)
	all, err := ex.AllGather(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("symmetric: group %q rendezvous: %w", name, err)
	}
	infos := make([]peerInfo, g.World)
	for r, v := range all {
		if err := json.Unmarshal(v, &infos[r]); err != nil {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "symmetric: rank %d sent a malformed rendezvous record: %v", r, err)
		}
	}
	if err := validatePeers(infos, b.opts.allowOverlap); err != nil {
		return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
	}
	tm.Mark("exchange")
	denied := b.checkPeers(ctx, infos, g.Rank)
	tm.Mark("peer-access")
	handles, err := b.exchangeHandles(ctx, ex, infos, g.Rank)
	if err != nil {
		return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
	}
	tm.Mark("handles")
	// On an error return, the peers' handles not yet closed below are
	// closed here (closing an os.File twice is harmless), and so is this
	// rank's own when every rank has a process of its own; where ranks
	// share this process they may still be duplicating it by number, so
	// it is left open (closingRound closes it on success).
	ownProcess := onePerProcess(infos)
	defer func() {
		for r, h := range handles {
			if h.File != nil && (r != g.Rank || (err != nil && ownProcess)) {
				_ = h.File.Close()
			}
		}
	}()
	mem := &Memory{dev: b.dev, rank: g.Rank, world: g.World, size: b.size, span: b.bufSpan,
		local: b.alloc, peers: make([]backend.Allocation, g.World), opts: b.opts, name: name}
	m = mem
	if sharesDevice(infos) {
		if mem.launchEx, err = store.NewExchange(g.Store, "symm/"+name+"/launch", g.Rank, g.World); err != nil {
			return nil, fmt.Errorf("symmetric: %w", err)
		}
	}
	defer func() {
		if err != nil {
			// An error return has set m to nil by now; mem is still the
			// half-built memory, whose peers (and setup) must be freed.
			_ = mem.Close()
		}
	}()
	for r, h := range handles {
		if r == g.Rank || denied.has(r) {
			continue // a peer this rank cannot reach is not mapped
		}
		a, ierr := b.dev.Import(ctx, h)
		if h.File != nil {
			_ = h.File.Close()
		}
		if ierr != nil {
			// A peer whose memory cannot be mapped is one this rank cannot
			// access: say so in the closing exchange, so that every rank
			// refuses alike instead of the others waiting for this one.
			denied = append(denied, denial{Rank: r, Reason: "mapping its buffer failed: " + ierr.Error()})
			continue
		}
		m.peers[r] = a
	}
	// With every peer mapped, the kernels can be set up; backends that
	// want it (backend.MappedPeerChecker) then have peer access checked
	// through these mappings.
	tm.Mark("import")
	if b.throughMappings() {
		// Two rounds: the mapping failures first, so that every rank
		// knows whether all of them can run the probe (a barrier among
		// all); then the probe's own failures.
		if err = closingRound(ctx, ex, denied, infos, handles[g.Rank]); err != nil {
			return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
		}
		tm.Mark("mapped")
		if err = m.setup(ctx, module); err != nil {
			return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
		}
		tm.Mark("setup")
		if sharesDevice(infos) {
			// Ranks on one device share its context, and setting up
			// (loading the module, pinning host memory) may wait for every
			// kernel running in it: a rank whose probe already spins
			// would wait for a peer stuck in setup behind that very
			// kernel. So no rank starts the probe before all are set up.
			if _, err = ex.AllGather(ctx, nil); err != nil {
				return nil, fmt.Errorf("symmetric: group %q: waiting for ranks sharing a device: %w", name, err)
			}
			tm.Mark("shared-device barrier")
		}
		denied = m.probeMappings(ctx, infos, b.opts.peerCheck)
		tm.Mark("probe")
		if err = closingRound(ctx, ex, denied, infos, backend.Handle{}); err != nil {
			return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
		}
		tm.Mark("closing")
		return m, nil
	}
	// Every rank keeps its exported handle open until all peers have
	// imported it (needed for in-process descriptor sharing). The same
	// round carries each rank's peer-access failures, so that all ranks
	// reach one verdict without a round of its own.
	if err = closingRound(ctx, ex, denied, infos, handles[g.Rank]); err != nil {
		return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
	}
	tm.Mark("closing")
	if err = m.setup(ctx, module); err != nil {
		return nil, fmt.Errorf("symmetric: group %q: %w", name, err)
	}
	tm.Mark("setup")
	return m, nil
}

// sharesDevice reports whether two ranks of the group use one device of
// one host (collective.Options.AllowOverlap: testing only).
func sharesDevice(infos []peerInfo) bool {
	type where struct {
		host   string
		device int
	}
	seen := map[where]bool{}
	for _, in := range infos {
		w := where{in.Host, in.Device}
		if seen[w] {
			return true
		}
		seen[w] = true
	}
	return false
}

// onePerProcess reports whether every rank has a process of its own.
func onePerProcess(infos []peerInfo) bool {
	pids := map[int]bool{}
	for _, in := range infos {
		pids[in.PID] = true
	}
	return len(pids) == len(infos)
}

// closingRound is a barrier of the exchange that carries every rank's
// peer-access failures and returns the common verdict (see peerVerdict).
// own, this rank's exported handle, is closed once every rank has passed
// the barrier, so after every peer has imported it.
func closingRound(ctx context.Context, ex *store.Exchange, denied denials, infos []peerInfo, own backend.Handle) error {
	verdicts, err := ex.AllGather(ctx, denied.encode())
	if err != nil {
		return err
	}
	if own.File != nil {
		_ = own.File.Close()
	}
	return peerVerdict(verdicts, infos)
}

func validatePeers(infos []peerInfo, allowOverlap bool) error {
	for r, in := range infos {
		if in.Host != infos[0].Host {
			return fmt.Errorf("%w: rank 0 is on %q, rank %d on %q", ErrHostMismatch, infos[0].Host, r, in.Host)
		}
		if in.Size != infos[0].Size || in.Span != infos[0].Span {
			return fmt.Errorf("%w: rank 0 has %d bytes, rank %d has %d", ErrSizeMismatch, infos[0].Size, r, in.Size)
		}
	}
	if !allowOverlap {
		seen := map[int]int{}
		for r, in := range infos {
			if p, dup := seen[in.Device]; dup {
				return fmt.Errorf("%w: ranks %d and %d both use device %d (each rank must select its own device first)",
					ErrOverlappingDevices, p, r, in.Device)
			}
			seen[in.Device] = r
		}
	}
	return nil
}

// exchangeHandles returns every rank's handle to this block's allocation,
// as this process can import it.
func (b *Block) exchangeHandles(ctx context.Context, ex *store.Exchange, infos []peerInfo, rank int) ([]backend.Handle, error) {
	world := len(infos)
	handles := make([]backend.Handle, world)
	allFabric := true
	for _, in := range infos {
		allFabric = allFabric && in.Fabric
	}
	if allFabric {
		h, err := b.alloc.Export(backend.HandleFabric)
		if err != nil {
			return nil, fmt.Errorf("exporting fabric handle: %w", err)
		}
		all, err := ex.AllGather(ctx, h.Opaque)
		if err != nil {
			return nil, err
		}
		for r, v := range all {
			handles[r] = backend.Handle{Kind: backend.HandleFabric, Opaque: v, Size: h.Size}
		}
		return handles, nil
	}
	if !b.caps.Has(backend.CapHandleFD) {
		return nil, backend.Errorf(backend.CodeNotSupported, "backend shares memory neither by fabric handle nor by descriptor")
	}
	h, err := b.alloc.Export(backend.HandleFD)
	if err != nil {
		return nil, fmt.Errorf("exporting descriptor: %w", err)
	}
	handles[rank] = h
	samePID, distinct := true, map[int]bool{}
	for _, in := range infos {
		samePID = samePID && in.PID == infos[0].PID
		distinct[in.PID] = true
	}
	switch {
	case samePID:
		// All ranks share one process: descriptor numbers are valid
		// process-wide, so the store carries them and peers dup them.
		var num [8]byte
		binary.LittleEndian.PutUint64(num[:], uint64(h.File.Fd()))
		all, err := ex.AllGather(ctx, num[:])
		if err != nil {
			_ = h.File.Close()
			return nil, err
		}
		for r, v := range all {
			if r == rank {
				continue
			}
			f, err := dupFD(int(binary.LittleEndian.Uint64(v)), h.Size)
			if err != nil {
				closeHandles(handles)
				return nil, fmt.Errorf("duplicating rank %d's descriptor: %w", r, err)
			}
			handles[r] = f
		}
		return handles, nil
	case len(distinct) == world:
		pids := make([]int, world)
		for r, in := range infos {
			pids[r] = in.PID
		}
		ch, err := ipc.Listen(infos[0].Nonce)
		if err != nil {
			_ = h.File.Close()
			return nil, err
		}
		defer ch.Close()
		ch.SetPeers(pids)
		fds, err := ch.AllGatherFD(ctx, rank, pids, "symm", int(h.File.Fd()))
		if err != nil {
			_ = h.File.Close()
			return nil, err
		}
		for r, fd := range fds {
			if r != rank {
				handles[r] = backend.Handle{Kind: backend.HandleFD, File: os.NewFile(uintptr(fd), fmt.Sprintf("symm-rank%d", r)), Size: h.Size}
			}
		}
		return handles, nil
	default:
		_ = h.File.Close()
		return nil, backend.Errorf(backend.CodeNotSupported, "ranks sharing a process must all share it (%d processes for %d ranks)", len(distinct), world)
	}
}

func closeHandles(hs []backend.Handle) {
	for _, h := range hs {
		if h.File != nil {
			_ = h.File.Close()
		}
	}
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// moduleLoad is the kernel module (kernels.ModuleName) loading on its own
// goroutine during a rendezvous.
type moduleLoad struct {
	done  chan struct{}
	mod   backend.Module
	err   error
	taken bool
}

func startModuleLoad(ctx context.Context, dev backend.Device) *moduleLoad {
	l := &moduleLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.mod, l.err = dev.LoadModule(ctx, backend.ModuleSource{Name: kernels.ModuleName})
	}()
	return l
}

// take waits for the load to end and hands the module to the caller.
func (l *moduleLoad) take() (backend.Module, error) {
	<-l.done
	l.taken = true
	return l.mod, l.err
}

// release unloads the module if no one took it (a rendezvous that failed
// first), once its load has ended.
func (l *moduleLoad) release() {
	if l.taken {
		return
	}
	<-l.done
	if l.mod != nil {
		_ = l.mod.Close()
	}
}
