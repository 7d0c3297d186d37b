package collective

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
	"github.com/intranode/intranode/internal/closing"
	"github.com/intranode/intranode/internal/phases"
	"github.com/intranode/intranode/internal/pidwatch"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric"
	"github.com/intranode/intranode/symmetric/store"
)

// Constants of the reference.
const (
	// MaxDevices is the largest group (kMaxDevices).
	MaxDevices = connectivity.MaxDevices
	// DefaultBufferSize is the symmetric buffer each rank allocates
	// (kDefaultBufferSize, 10 MiB).
	DefaultBufferSize = 10 << 20
	// P2PStateSize is the per-rank state area (kP2pStateSize).
	P2PStateSize = kernels.StateSize
	// EnvEnable is what IsEnabled reports.
	EnvEnable = "ENABLE_INTRA_NODE_COMM"
	// DefaultTimeout bounds every wait of a comm whose caller gives no
	// deadline.
	DefaultTimeout = 60 * time.Second
)

// Rendezvous refusals, for errors.Is. Each is what the reference reports by
// returning false.
var (
	ErrNotSupported       = errors.New("collective: intra-node comm not supported")
	ErrWorldSize          = errors.New("collective: world size out of range")
	ErrHostMismatch       = errors.New("collective: ranks are on different hosts")
	ErrOverlappingDevices = errors.New("collective: ranks share a device")
	ErrTopology           = errors.New("collective: topology not usable")
	ErrNotInitialized     = errors.New("collective: comm has not rendezvoused")
	ErrTooLarge           = errors.New("collective: input larger than the symmetric buffer")
)

// usage counts all-reduces served by every comm of the process (the
// reference's usage counter); the only package-level state besides the
// registry of algorithms.
var usage atomic.Int64

// UsageCounter returns the number of all-reduces served in this process.
func UsageCounter() int64 { return usage.Load() }

// IsEnabled reports whether ENABLE_INTRA_NODE_COMM=1 is set.
func IsEnabled() bool { return os.Getenv(EnvEnable) == "1" }

// Options configure a Comm.
type Options struct {
	// BufferSize is the symmetric buffer per rank; DefaultBufferSize if 0.
	BufferSize int
	// Backend to use; opened with backend.Open(BackendName) if nil.
	Backend backend.Backend
	// BackendName is used when Backend is nil ("auto" if empty).
	BackendName string
	// Device is the device index this rank uses; the rank's index if < 0
	// is not what you want, set it explicitly. Default: rank.
	Device *int
	// Timeout bounds waits when a call's context has no deadline.
	Timeout time.Duration
	// AllowOverlap lets ranks share a device (testing only).
	AllowOverlap bool
	// Hostname overrides the host name reported in the handshake (tests
	// simulate several hosts with it).
	Hostname string
	// Logger receives debug logs; silent if nil.
	Logger *slog.Logger
}

// Comm is an intra-node communicator (the reference's IntraNodeComm). Create
// it with New, then call Rendezvous on every rank.
type Comm struct {
	st    store.Store
	rank  int
	world int
	opts  Options
	log   *slog.Logger

	mu          sync.Mutex
	initialized bool
	refused     error // a topology refusal kept for the backend's fallback all-reduce (refused.go)
	ownBackend  bool
	b           backend.Backend
	dev         backend.Device
	devIndex    int
	topo        connectivity.Topology
	hcm         [][4]int
	name        string
	mem         *symmetric.Memory
	module      backend.Module // the built-in kernels, owned by mem
	fns         map[string]backend.Function
	// kfns caches the collective kernels by kernels.AlgoID and dtype, so
	// a call neither formats the kernel name nor hashes it (eager launches
	// are bound by the host).
	kfns [kernelIDs][5]backend.Function
	// argv holds a launch's arguments while enqueue hands them to the
	// stream, which does not keep them (backend.Stream.Launch).
	argv   [kernels.AllReduceArgCount]backend.Arg
	opt    call // callOf's scratch
	status backend.HostAllocation
	stream backend.Stream // for Barrier and internal work
	// lanes and forks let the copy path (moveCopy) run its copies beside
	// each other: made as its calls need them (lanes.go).
	lanes []lane
	forks [2]backend.Event
	tab   Thresholds
	calls callState // sequence numbers and the failure that ends the comm (verify.go)
	// aborting is closed when the abort of the vendor communicator that
	// overran started has ended, with its error in abortErr; nil while
	// none has started.
	aborting chan struct{}
	abortErr error
}

// New creates a comm for rank of world ranks meeting through st. It does
// not communicate; Rendezvous does.
func New(st store.Store, rank, world int, opts Options) (*Comm, error) {
	if st == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: nil store")
	}
	if rank < 0 || rank >= world {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: rank %d out of range for world %d", rank, world)
	}
	if opts.BufferSize == 0 {
		opts.BufferSize = DefaultBufferSize
	}
	if opts.BufferSize < 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: negative buffer size %d", opts.BufferSize)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dev := rank
	if opts.Device != nil {
		dev = *opts.Device
	}
	return &Comm{st: st, rank: rank, world: world, opts: opts, log: log.With("rank", rank), devIndex: dev}, nil
}

// Rank is this comm's rank.
func (c *Comm) Rank() int { return c.rank }

// World is the group size.
func (c *Comm) World() int { return c.world }

// Topology is the detected topology (Unknown before Rendezvous).
func (c *Comm) Topology() connectivity.Topology {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo
}

// BufferSize is the symmetric buffer size per rank.
func (c *Comm) BufferSize() int { return c.opts.BufferSize }

// Name is the group name, IntraNodeComm<n>, assigned by Rendezvous.
func (c *Comm) Name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

// Store is the store the comm's ranks meet through.
func (c *Comm) Store() store.Store { return c.st }

// GroupName is Name without taking the comm's lock, for a
// FallbackAllReducer: AllReduce holds the lock while it calls the fallback,
// so Name would deadlock there. Rendezvous sets the name before the comm
// becomes usable and never changes it; do not call GroupName concurrently
// with Rendezvous.
func (c *Comm) GroupName() string { return c.name }

// Device is the device this rank uses, nil before Rendezvous.
func (c *Comm) Device() backend.Device {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dev
}

// Backend is the backend in use, nil before Rendezvous.
func (c *Comm) Backend() backend.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b
}

// Memory is the comm's symmetric memory, nil before Rendezvous.
func (c *Comm) Memory() *symmetric.Memory {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mem
}

type handshake struct {
	Host   string `json:"host"`
	Device int    `json:"device"`
	// Topology is the rank's topologyDigest.
	Topology uint64 `json:"topology"`
	// PID and PIDNamespace name the rank's process (pidwatch).
	PID          int    `json:"pid"`
	PIDNamespace string `json:"pid_namespace"`
}

// Rendezvous forms the group. It follows the reference's steps in order and
// returns nil once the comm is usable, or an error matching one of
// ErrNotSupported, ErrWorldSize, ErrHostMismatch, ErrOverlappingDevices or
// ErrTopology (or a store/backend error) saying why it is not. Calling it
// again after success is a no-op. After a failure the comm must be closed.
//
// ErrTopology covers devices that are neither fully connected nor a hybrid
// cube mesh, and pairs whose peer access fails: each rank asks the backend
// (Backend.PeerAccess, which runs a real write and read-back where the
// backend can) about every peer device the topology's kernels reach, the
// answers are shared in the symmetric memory's rendezvous, and every rank
// refuses with the same message, naming each failed pair and the backend's
// reason (backend.PeerTester). Ranks sharing a device are not checked.
//
// A comm refused with ErrTopology on a backend with its own all-reduce
// (FallbackAllReducer) keeps its device and name for that all-reduce
// (see refused.go); it too must be closed.
func (c *Comm) Rendezvous(ctx context.Context) (err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initialized {
		return nil
	}
	if c.refused != nil {
		return c.refused
	}
	ctx, cancel := withDefaultTimeout(ctx, c.opts.Timeout)
	defer cancel()
	callerCtx := ctx // ctx is watched for the peers' exit after the handshake
	defer func() {
		if err != nil {
			c.log.Debug("intra-node comm rendezvous refused", "err", err)
			c.topo, c.hcm = connectivity.Unknown, nil
			if !c.keepForFallback(callerCtx, err) {
				c.release()
			}
		}
	}()
	tm := phases.Start()
	// Step: supported at all?
	if err := c.openBackend(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	tm.Mark("backend")
	if c.world < 2 || c.world > MaxDevices {
		return fmt.Errorf("%w: %d ranks, need 2 to %d", ErrWorldSize, c.world, MaxDevices)
	}
	// Each rank counts the comms it has created; ranks create comms in
	// the same order, so the count names the group consistently even when
	// several ranks share one process.
	n, err := c.st.Add(ctx, "intranode/comm-counter/"+strconv.Itoa(c.rank), 1)
	if err != nil {
		return fmt.Errorf("collective: comm counter: %w", err)
	}
	id := n - 1
	tm.Mark("counter")
	// The link matrix is read before the handshake, so that what each
	// rank judges the topology from travels with it.
	m, err := c.b.LinkMatrix(ctx)
	if err != nil {
		return fmt.Errorf("collective: reading link matrix: %w", err)
	}
	tm.Mark("links")
	ex, err := store.NewExchange(c.st, fmt.Sprintf("IntraNodeComm%d/handshake-0", id), c.rank, c.world)
	if err != nil {
		return err
	}
	defer ex.Close(ctx)
	all, err := store.AllGatherValue(ctx, ex, encodeHandshake(handshake{Host: c.opts.Hostname, Device: c.devIndex,
		Topology: topologyDigest(m, connectivity.ForcedFullyConnected()), PID: os.Getpid(), PIDNamespace: pidwatch.Namespace()}))
	if err != nil {
		return fmt.Errorf("collective: handshake: %w", err)
	}
	tm.Mark("handshake")
	peers := make([]handshake, len(all))
	for r, raw := range all {
		peers[r] = decodeHandshake(raw)
	}
	ctx, endWatch := c.watchPeers(ctx, id, peers)
	defer endWatch(&err)
	for r, p := range peers {
		if p.Host != peers[0].Host {
			return fmt.Errorf("%w: rank 0 is on %q but rank %d is on %q", ErrHostMismatch, peers[0].Host, r, p.Host)
		}
	}
	devices := make([]int, c.world)
	seen := map[int]int{}
	for r, p := range peers {
		devices[r] = p.Device
		if q, dup := seen[p.Device]; dup && !c.opts.AllowOverlap {
			return fmt.Errorf("%w: ranks %d and %d both selected device %d; each rank must select its own device first",
				ErrOverlappingDevices, q, r, p.Device)
		}
		seen[p.Device] = r
	}
	// Named before the topology is judged: a refused comm kept for the
	// backend's fallback all-reduce needs the name as much as a usable one.
	c.name = fmt.Sprintf("IntraNodeComm%d", id)
	var differ []int
	for r, p := range peers {
		if p.Topology != peers[0].Topology {
			differ = append(differ, r)
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("%w: ranks %v judge the topology from another link matrix (or another %s) than rank 0; every rank of a group must see the same host",
			ErrTopology, differ, connectivity.EnvForceFullyConnected)
	}
	topo, err := detect(m, devices)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTopology, err)
	}
	if topo == connectivity.Unknown {
		return fmt.Errorf("%w: devices %v are not fully connected nor a hybrid cube mesh", ErrTopology, devices)
	}
	if topo == connectivity.HybridCubeMesh {
		sub, _ := groupMatrix(m, devices)
		if c.hcm, err = connectivity.HCMPeers(sub); err != nil {
			return fmt.Errorf("%w: %w", ErrTopology, err)
		}
	}
	c.topo = topo
	tm.Mark("topology")
	if err := c.setupMemory(ctx, tm); err != nil {
		return err
	}
	c.tab = DefaultThresholds(c.b.Name(), c.world)
	c.initialized = true
	c.log.Debug("intra-node comm ready", "group", c.name, "topology", topo, "devices", devices)
	c.log.Debug("rendezvous phases", tm.Attrs()...)
	return nil
}

func (c *Comm) openBackend(ctx context.Context) error {
	if c.b == nil {
		if c.opts.Backend != nil {
			c.b = c.opts.Backend
		} else {
			b, err := backend.Open(ctx, c.opts.BackendName)
			if err != nil {
				return err
			}
			c.b, c.ownBackend = b, true
		}
	}
	if err := c.b.Probe(ctx); err != nil {
		return err
	}
	n, err := c.b.DeviceCount(ctx)
	if err != nil {
		return err
	}
	if c.devIndex < 0 || c.devIndex >= n {
		return backend.Errorf(backend.CodeInvalidArgument, "device %d out of range: backend %s has %d devices", c.devIndex, c.b.Name(), n)
	}
	return nil
}

func (c *Comm) setupMemory(ctx context.Context, tm *phases.Timer) error {
	dev, err := c.b.Open(ctx, c.devIndex)
	if err != nil {
		return fmt.Errorf("collective: opening device %d: %w", c.devIndex, err)
	}
	c.dev = dev
	tm.Mark("device")
	opts := []symmetric.Option{symmetric.WithTimeout(c.opts.Timeout), symmetric.WithAllowOverlap(c.opts.AllowOverlap),
		symmetric.WithHostname(c.opts.Hostname), symmetric.WithLogger(c.log), symmetric.WithPeerCheck(c.reaches)}
	blk, err := symmetric.Alloc(ctx, c.b, dev, c.opts.BufferSize, opts...)
	if err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	tm.Mark("alloc")
	mem, err := blk.Rendezvous(ctx, c.name, symmetric.GroupInfo{Rank: c.rank, World: c.world, Store: c.st})
	if errors.Is(err, symmetric.ErrPeerAccess) {
		return fmt.Errorf("%w: %w", ErrTopology, err)
	}
	if err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	c.mem = mem
	tm.Mark("symmetric")
	// The symmetric memory already loaded the built-in kernels on this
	// device; loading them a second time would only cost rendezvous time.
	c.module = mem.Module()
	c.fns = map[string]backend.Function{}
	c.kfns = [kernelIDs][5]backend.Function{}
	if err := c.openControl(ctx); err != nil {
		return err
	}
	tm.Mark("status+stream")
	return nil
}

// openControl gives the comm what every all-reduce path needs on its
// device besides memory, where it lacks them: the kernels' status word and
// the stream for internal work.
func (c *Comm) openControl(ctx context.Context) error {
	var err error
	if c.status == nil {
		if c.status, err = c.dev.AllocHost(ctx, 64); err != nil {
			return fmt.Errorf("collective: status word: %w", err)
		}
	}
	if c.stream == nil {
		if c.stream, err = c.dev.NewStream(ctx); err != nil {
			return fmt.Errorf("collective: stream: %w", err)
		}
	}
	return nil
}

// function returns a kernel of the built-in module, cached.
func (c *Comm) function(name string) (backend.Function, error) {
	if f, ok := c.fns[name]; ok {
		return f, nil
	}
	f, err := c.module.Function(name)
	if err != nil {
		return nil, err
	}
	c.fns[name] = f
	return f, nil
}

// kernelIDs bounds kernels.AlgoID.
const kernelIDs = 9

// kernelFunction returns the kernel of a for dtype (both valid).
func (c *Comm) kernelFunction(a kernels.Algo, dtype backend.DType) (backend.Function, error) {
	id := kernels.AlgoID(a)
	// Row 0 holds the division kernel, which has no AlgoID.
	cached := (id > 0 || a == kernels.Divide) && id < kernelIDs && int(dtype) < len(c.kfns[id])
	if cached {
		if f := c.kfns[id][dtype]; f != nil {
			return f, nil
		}
	}
	f, err := c.function(kernels.KernelName(a, dtype))
	if err == nil && cached {
		c.kfns[id][dtype] = f
	}
	return f, err
}

// fallbackReleaser is a backend whose vendor library keeps a communicator
// per comm (CUDA's NCCL): ReleaseFallback aborts it.
type fallbackReleaser interface {
	ReleaseFallback(*Comm) error
}

// overran fails the comm after a call whose work was still running at its
// deadline (cause says how the wait ended) and starts the abort of the
// backend's vendor communicator, whose kernels (unlike the comm's) have no
// deadline of their own and would otherwise hold the stream, and every
// free that waits for it, for good. It returns the error the caller should
// report at once: the abort (ncclCommAbort, which can take seconds when it
// meets a dead peer's sockets) goes on while the caller hears of the
// failure, and Close waits for it.
func (c *Comm) overran(cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls.failed == nil {
		c.calls.failed = cause
	}
	c.setFailed()
	if r, ok := c.b.(fallbackReleaser); ok && c.aborting == nil {
		done := make(chan struct{})
		c.aborting = done
		go func() {
			defer close(done)
			if err := r.ReleaseFallback(c); err != nil {
				c.log.Warn("aborting the vendor communicator after a call overran its deadline", "err", err)
				c.abortErr = err
			}
		}()
	}
	return cause
}

// setFailed sets the comm's failed word before its vendor communicator is
// aborted: the confirmations still queued on this rank's streams then
// confirm nothing (confirmVendor). The caller holds c.mu.
func (c *Comm) setFailed() {
	if c.status != nil {
		symmetric.SetFailed(c.status.Bytes())
	}
}

// Close releases the comm's memory, streams and (if it opened it) the
// backend. It does not wait for peers; on a GPU, freeing the comm's
// memory waits for its kernels still running (as ncclCommDestroy waits
// for uncompleted operations), and a kernel waiting for a peer that never
// comes runs until its deadline. Abort does not wait for those.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initialized = false
	return c.release()
}

// Abort is Close for a comm whose calls may still wait for a peer that
// will not come (dead, hung, or aborting itself), as ncclCommAbort: it
// interrupts them first (Interrupt), so that the frees that follow no
// longer wait out the kernels' deadline (the NCCL library's is 10
// minutes).
func (c *Comm) Abort() error {
	c.Interrupt()
	return c.Close()
}

// Interrupt stops the comm's kernels still waiting for a peer, by writing
// kernels.StatusClosed into the comm's status word, which their waits
// watch. Those calls' outputs are then undefined, and every later call
// fails. The caller then closes the comm (Abort does both); the C
// library interrupts before it closes the streams it owns, whose closing
// waits for their work.
func (c *Comm) Interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status != nil {
		symmetric.SetClosed(c.status.Bytes())
	}
}

func (c *Comm) release() error {
	var errs []error
	// The vendor communicator first: aborting it ends any of its kernels
	// still waiting for a peer, which the frees below would wait for.
	if r, ok := c.b.(fallbackReleaser); ok && (c.mem != nil || c.refused != nil) {
		c.setFailed()
		if c.aborting != nil {
			<-c.aborting // bounded by the backend's own release timeout
			errs = append(errs, c.abortErr)
		} else {
			errs = append(errs, r.ReleaseFallback(c))
		}
	}
	errs = c.closeLanes(errs)
	errs = closing.Field(errs, &c.stream)
	errs = closing.Field(errs, &c.status)
	c.module = nil // owned by c.mem
	c.refused = nil
	errs = closing.Field(errs, &c.mem)
	errs = closing.Field(errs, &c.dev)
	if c.ownBackend {
		errs = closing.Field(errs, &c.b)
	}
	return errors.Join(errs...)
}

// groupMatrix restricts the host's matrix to the ranks' devices, in rank
// order. Ranks that share a device (allowed for testing) reach each other
// through that device's own memory, so they count as linked.
func groupMatrix(m connectivity.Matrix, devices []int) (connectivity.Matrix, error) {
	sub, err := m.Sub(devices)
	if err != nil {
		return connectivity.Matrix{}, err
	}
	for a := range devices {
		for b := range devices {
			if a != b && devices[a] == devices[b] {
				sub.Set(a, b, 1)
			}
		}
	}
	return sub, nil
}

// detect classifies the group, honouring TEST_INTRA_NODE_COMM.
func detect(m connectivity.Matrix, devices []int) (connectivity.Topology, error) {
	if err := m.Validate(); err != nil {
		return connectivity.Unknown, err
	}
	sub, err := groupMatrix(m, devices)
	if err != nil {
		return connectivity.Unknown, err
	}
	identity := make([]int, len(devices))
	for i := range identity {
		identity[i] = i
	}
	return connectivity.DetectGroup(sub, identity)
}

// watchPeers watches, for the rest of the rendezvous named by id, the
// processes the ranks announced in the handshake (pidwatch): one that
// exits ends ctx on every other rank at once, named, instead of at the
// deadline. Every rank records under "IntraNodeComm<id>/left/<rank>" that
// it has left the rendezvous, whatever the outcome, before it returns, so
// that a peer that exits after that (it got the group's verdict and ended)
// is not taken for one that died in the middle. The returned end, deferred
// with the rendezvous's error, puts a peer's exit in place of what it did
// to the wait (pidwatch.Cause), stops the watch and records this rank's
// leaving.
func (c *Comm) watchPeers(ctx context.Context, id int64, peers []handshake) (context.Context, func(err *error)) {
	leftKey := func(r int) string { return fmt.Sprintf("IntraNodeComm%d/left/%d", id, r) }
	withLeft := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), leftTimeout)
	}
	var procs []pidwatch.Peer
	for r, p := range peers {
		if p.Host == c.opts.Hostname {
			procs = append(procs, pidwatch.Peer{Rank: r, PID: p.PID, Namespace: p.PIDNamespace})
		}
	}
	wctx, stop := pidwatch.Watch(ctx, procs, func(r int) bool {
		lctx, cancel := withLeft()
		defer cancel()
		left, err := c.st.Check(lctx, leftKey(r))
		return err == nil && left
	})
	return wctx, func(err *error) {
		*err = pidwatch.Cause(wctx, *err)
		stop()
		lctx, cancel := withLeft()
		_ = c.st.Set(lctx, leftKey(c.rank), []byte{1})
		cancel()
	}
}

// leftTimeout bounds setting and reading the keys that say a rank has left
// its rendezvous.
const leftTimeout = time.Second

// withDefaultTimeout returns ctx as it is when it has a deadline, else ctx
// bounded by d: every wait has a deadline, the caller's or the options'.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
