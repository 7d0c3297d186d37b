package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/closing"
	"github.com/intranode/intranode/symmetric/store"
)

// InterHost is a communicator among ranks of different hosts: the part of
// a HostGroups collective that crosses hosts. Its calls are enqueued on
// the caller's stream, like the Comm's, and return once enqueued; count
// is per rank as for the Comm's collectives (all-reduce: the whole
// message). Ranks are numbered as the InterHostConfig gave them.
type InterHost interface {
	AllReduce(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType, op backend.ReduceOp) error
	ReduceScatter(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType, op backend.ReduceOp) error
	AllGather(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType) error
	// Err reports a failure the engine found after a call returned (NCCL:
	// ncclCommGetAsyncError); nil while it is healthy.
	Err() error
	// Close aborts the communicator without waiting for its peers; work
	// of it still queued ends.
	Close() error
}

// InterHostConfig says which communicator to form.
type InterHostConfig struct {
	// Store is where the members meet; Name is unique in it (every
	// member passes the same).
	Store store.Store
	Name  string
	// Rank is this member's index among World members.
	Rank, World int
	// Device is the device index the member's calls run on.
	Device int
	// Timeout bounds forming the communicator when ctx has no deadline.
	Timeout time.Duration
}

// InterHostBackend is a backend with an engine for crossing hosts: NCCL
// on CUDA, RCCL on ROCm. HostGroups forms its inter-host communicators through it; on
// the fake backend, which has none, through LoopbackInterHost.
type InterHostBackend interface {
	NewInterHost(ctx context.Context, cfg InterHostConfig) (InterHost, error)
}

// LoopbackInterHost is a test double of an inter-host engine for ranks
// that are in fact on one machine (simulated hosts): a Comm of this
// package among the members, over shared memory, with ranks allowed to
// share a device (members of one rail have the same device index). It
// checks calls as a Comm does. It serves the fake backend, so that the
// whole hierarchical path runs in CI; it never crosses a real host.
//
// Like NCCL, a step of it that cannot complete must not let its stream go
// on as if it had: a Comm's kernel that times out records that in its
// status word and returns, and the rank's next step inside its host would
// then send stale data to its peers. So its kernels wait loopbackGrace
// past the caller's deadline, by which HostWork.Synchronize has failed the
// job and closed the double, which ends them with an error that stops
// their stream (the fake backend's streams keep a failed op's error).
func LoopbackInterHost(ctx context.Context, b backend.Backend, cfg InterHostConfig) (InterHost, error) {
	if cfg.World > MaxDevices {
		return nil, backend.Errorf(backend.CodeNotSupported,
			"collective: the loopback inter-host double spans at most %d ranks, not %d", MaxDevices, cfg.World)
	}
	view, err := store.NewPrefixed(cfg.Store, "loopback/"+cfg.Name+"/")
	if err != nil {
		return nil, err
	}
	dev := cfg.Device
	c, err := New(view, cfg.Rank, cfg.World, Options{Backend: b, Device: &dev, AllowOverlap: true,
		Hostname: "intranode-loopback-interhost", Timeout: cfg.Timeout, BufferSize: 1 << 20})
	if err != nil {
		_ = view.Close()
		return nil, err
	}
	if err := c.Rendezvous(ctx); err != nil {
		_ = c.Close()
		_ = view.Close()
		return nil, fmt.Errorf("collective: loopback inter-host %s: %w", cfg.Name, err)
	}
	return &loopback{c: c, view: view}, nil
}

type loopback struct {
	c    *Comm
	view *store.Prefixed
}

func enqueued(w *Work, err error) error {
	if err != nil {
		return err
	}
	return w.Close()
}

// loopbackGrace is how long past its caller's deadline a step of the
// loopback double waits.
const loopbackGrace = time.Second

// graced is ctx with loopbackGrace added to its deadline, if it has one.
func graced(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), dl.Add(loopbackGrace))
}

func (l *loopback) AllReduce(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType, op backend.ReduceOp) error {
	ctx, cancel := graced(ctx)
	defer cancel()
	return enqueued(l.c.AllReduce(ctx, s, in, count, dtype, op, None, Output(out)))
}

func (l *loopback) ReduceScatter(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType, op backend.ReduceOp) error {
	ctx, cancel := graced(ctx)
	defer cancel()
	return enqueued(l.c.ReduceScatter(ctx, s, in, out, count, dtype, op, Direct))
}

func (l *loopback) AllGather(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType) error {
	ctx, cancel := graced(ctx)
	defer cancel()
	return enqueued(l.c.AllGather(ctx, s, in, out, count, dtype, Direct))
}

// Err is the comm's kernel status: a peer that failed or differed.
func (l *loopback) Err() error { return l.c.CheckStatus() }

func (l *loopback) Close() error { return errors.Join(l.c.Close(), l.view.Close()) }

// hostPath is how a HostGroups collective runs.
type hostPath int

const (
	// pathLocal: one host; the Comm alone.
	pathLocal hostPath = iota
	// pathHier: inside each host through its Comm, across hosts through
	// the rail of this rank's local index.
	pathHier
	// pathFlat: the inter-host engine across every rank of the job.
	pathFlat
)

// interHost is a HostGroups' state for collectives across hosts.
type interHost struct {
	job store.Store // the whole job's store
	// allRanks are the members of the flat engine (every rank), railRanks
	// those of this rank's rail (InterNodeRanks; nil when the groups differ
	// in size), both in the engines' order.
	allRanks, railRanks []int
	b                   backend.Backend
	dev                 int           // this rank's device index
	timeout             time.Duration // Options.Timeout, for forming the engines
	mu                  sync.Mutex
	// engines[hier][check] are the engines formed so far: across every
	// rank of the job (flat) or this rank's local index across hosts
	// (hier), for the data or for the call check beside it (hostcheck.go).
	engines [2][2]InterHost
	err     error // a failure that ended the job's collectives
	// scratch is device memory for the reordering of reduce-scatter and
	// all-gather, grown on demand, the largest last; the smaller ones stay
	// until Close, since work still queued may use them.
	scratch []backend.Allocation
	// own is the device a rank without a comm opened (Device).
	own backend.Device
	// check holds the records of the call check's all-gather on the
	// engines (hostcheck.go), made on the first call that needs it.
	check *callCheck
	// mesh carries the call check between the hosts' CPUs in a job of at
	// most MeshMaxRanks ranks (hostmesh.go), formed on the first checked
	// call.
	mesh *checkMesh
	// seq numbers the checked calls, from 1.
	seq uint32
	// aborts are the engine aborts that fail started; Close waits for them.
	aborts []chan error
}

// Device returns the device this rank's collectives run on: its comm's,
// or for a rank without a comm, its device (Options.Device, else its
// index among its host's ranks) opened on Options.Backend and kept until
// Close. Buffers and streams of HostGroups calls belong to it.
func (h *HostGroups) Device(ctx context.Context) (backend.Device, error) {
	if h.Comm != nil {
		return h.Comm.Device(), nil
	}
	ih := h.ih
	if ih == nil || ih.b == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"collective: host groups: a rank without a comm needs Options.Backend for its device")
	}
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if ih.own == nil {
		d, err := ih.b.Open(ctx, ih.dev)
		if err != nil {
			return nil, fmt.Errorf("collective: host groups: opening device %d: %w", ih.dev, err)
		}
		ih.own = d
	}
	return ih.own, nil
}

// DefaultFlatFrom is the message size from which HostGroups' collectives
// on CUDA take flat NCCL rather than the hierarchical path: where, by the
// cost model of docs/MULTIHOST.md (8 GPUs a host, 350 GB/s NVLink and
// 50 GB/s of network per GPU), the hierarchical steps, which run one after
// the other, cost more NVLink time than they save in network latency. Not
// measured on a real network: over simulated hosts, where NCCL crosses
// between "hosts" on loopback sockets, the hierarchical path stays 1.5–2.3×
// faster up to 256 MiB.
const DefaultFlatFrom = 32 << 20

// DefaultHostFlat returns the sizes HostGroups' collectives on CUDA send
// flat in a job of world ranks: from DefaultFlatFrom on, and below it
// where flat NCCL was measured faster over simulated hosts with the call
// check on (the default): reduce-scatter and all-gather below 32 KiB,
// where one NCCL call's latency beats three steps' (4×H200 as 2 hosts × 2,
// 1–16 KiB: flat 29–39 µs against 38–51), the reduce-scatter from 128 KiB
// to 512 KiB (256 KiB: flat faster by 7–17% in six runs of six on 4×H100),
// and the all-reduce from 32 KiB to 128 KiB (64 KiB: flat 122 µs against
// 135–139). In a job of at most MeshMaxRanks ranks the all-reduce is flat
// below 32 KiB too: there the check of a flat call runs on the CPUs while a
// hierarchical call still all-gathers its status words on the engine, and
// flat won at 1–4 KiB in five runs of six and at 16 KiB in two of three
// (4×H100 as 2 × 2, flat 77–93 µs against 81–103; docs/MULTIHOST.md). In a
// larger job both paths gather their records on the engine, as all jobs
// did when the hierarchical path was measured faster at 1–16 KiB. The
// bounds between measured sizes are their geometric means.
func DefaultHostFlat(world int) map[Op][]Window {
	large := Window{Min: DefaultFlatFrom}
	small := Window{Min: 0, Max: 32<<10 - 1}
	allReduce := Window{Min: 32 << 10, Max: 128<<10 - 1}
	if world <= MeshMaxRanks {
		allReduce.Min = 0
	}
	return map[Op][]Window{
		OpAllReduce:     {allReduce, large},
		OpReduceScatter: {small, {Min: 128 << 10, Max: 512<<10 - 1}, large},
		OpAllGather:     {small, large},
	}
}

// path picks the route of a collective op of the given size in bytes (the
// whole message): the Comm alone on one host; hierarchical when there is
// more than one host, every host has the same number of ranks (2 or
// more), each with a comm, and the size is in none of Flat's windows for
// op; flat otherwise.
func (h *HostGroups) path(op Op, bytes int) hostPath {
	if len(h.Groups) == 1 && h.Comm != nil {
		return pathLocal
	}
	if !h.AllJoined() {
		return pathFlat
	}
	if h.ih == nil || h.ih.railRanks == nil {
		return pathFlat
	}
	for _, w := range h.Flat[op] {
		if w.Contains(bytes) {
			return pathFlat
		}
	}
	return pathHier
}

// engine returns the rail or flat communicator, forming it on first use.
//
// With check, it is the path's second communicator, among the same
// members, that carries the call check (hostcheck.go) beside the data.
func (h *HostGroups) engine(ctx context.Context, p hostPath, check bool) (InterHost, error) {
	ih := h.ih
	if ih == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: not made by JoinHosts")
	}
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if ih.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCommFailed, ih.err)
	}
	members := ih.members(p)
	cfg := InterHostConfig{Name: "flat", Rank: slices.Index(members, h.Rank), World: len(members)}
	hier := p == pathHier
	slot := &ih.engines[b2i(hier)][b2i(check)]
	if hier {
		cfg.Name = "rail" + strconv.Itoa(h.LocalRank)
	}
	if check {
		cfg.Name = "check-" + cfg.Name
	}
	if *slot != nil {
		return *slot, nil
	}
	if ih.b == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"collective: host groups: a rank without a comm needs Options.Backend to cross hosts")
	}
	cfg.Store, cfg.Device, cfg.Timeout = ih.job, ih.dev, ih.timeout
	cfg.Name = "intranode/interhost/" + cfg.Name
	var e InterHost
	var err error
	if ib, ok := ih.b.(InterHostBackend); ok {
		e, err = ib.NewInterHost(ctx, cfg)
	} else if ih.b.Name() == "fake" {
		e, err = LoopbackInterHost(ctx, ih.b, cfg)
	} else {
		err = backend.Errorf(backend.CodeNotSupported, "collective: the %s backend has no engine for crossing hosts", ih.b.Name())
	}
	if err != nil {
		return nil, fmt.Errorf("collective: host groups: forming the %s communicator: %w", cfg.Name, err)
	}
	*slot = e
	return e, nil
}

// HostWork is an enqueued HostGroups collective. HostGroups calls are
// eager: do not capture them into a graph (the call check writes each
// call's record from the host when it is enqueued, and the engines are
// formed by a call's first use).
type HostWork struct {
	h      *HostGroups
	stream backend.Stream
	e      InterHost     // nil on one host
	check  *pendingCheck // the records' all-gather: nil on one host, with NoCallCheck or on the mesh's flat calls
	mesh   *checkMesh    // the mesh the record mine went on: nil on one host, with NoCallCheck or in a larger job
	mine   hostRecord
}

// Synchronize waits for the collective and reports its failures: the call
// check across hosts (ErrMismatch; backend.ErrPeerFailed for a member gone
// or failed inside its host), the Comm's kernels' and the inter-host
// engine's. A mismatch, a member gone, or a wait that ends at ctx's
// deadline with the work still running, fails the job's collectives and
// aborts the engines, whose kernels have no deadline of their own. A
// mismatch does so before waiting for the work, which it may have left
// hanging; a member gone, after the wait (bounded by ctx): the abort frees
// device memory, which waits for the kernels inside the host that wait out
// their deadline for the gone member, and would hold up the wait past ctx.
// Without a deadline in ctx, the wait is bounded by Options.Timeout: the
// engine's kernels have none of their own.
func (w *HostWork) Synchronize(ctx context.Context) error {
	if w.h.ih != nil {
		var cancel context.CancelFunc
		ctx, cancel = withDefaultTimeout(ctx, w.h.ih.timeout)
		defer cancel()
	}
	var errs []error
	failed, lost := false, false // a mismatch; a member gone or silent (the mesh)
	if w.mesh != nil {
		if cerr := w.mesh.judge(ctx, w.mine, w.h.ih.allRanks, w.h.Hosts); cerr != nil {
			errs = append(errs, cerr)
			if failed = errors.Is(cerr, ErrMismatch); failed {
				w.h.fail(cerr)
			} else {
				lost = true
			}
		}
	}
	if w.check != nil && !failed && !lost {
		if cerr := w.h.ih.judge(ctx, w.check, w.h.Hosts); cerr != nil {
			errs = append(errs, cerr)
			if failed = errors.Is(cerr, ErrMismatch); failed {
				w.h.fail(cerr)
			}
		}
	}
	err := w.stream.Synchronize(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("collective: host groups: waiting for the collective: %w", err))
	}
	if c := w.h.Comm; c != nil {
		if serr := c.CheckStatus(); serr != nil {
			errs = append(errs, serr)
		}
	}
	if w.e != nil && !failed { // a mismatch has closed the engine
		if eerr := w.e.Err(); eerr != nil {
			errs = append(errs, eerr)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	out := errors.Join(errs...)
	if lost || (err != nil && ctx.Err() != nil) {
		w.h.fail(out)
	}
	return out
}

// fail ends the job's collectives on this rank: the engines are aborted.
// The abort runs on its own goroutine, so that the caller gets its error
// at its deadline: NCCL's abort frees device memory, which waits for every
// kernel still running on the device (the ranks' own kernels included,
// which wait out their timeouts for a dead peer). Close waits for it.
func (h *HostGroups) fail(err error) {
	ih := h.ih
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if ih.err == nil {
		ih.err = err
	}
	engines := ih.takeEngines()
	mesh := ih.mesh
	ih.mesh = nil
	if len(engines) == 0 && mesh == nil {
		return
	}
	done := make(chan error, 1)
	ih.aborts = append(ih.aborts, done)
	go func() {
		err := closeAll(engines)
		if mesh != nil {
			// The peers waiting for this rank's records learn it is gone.
			err = errors.Join(err, mesh.Close())
		}
		done <- err
	}()
}

// takeEngines removes the engines formed so far and returns them; the
// caller holds ih.mu.
func (ih *interHost) takeEngines() []InterHost {
	var out []InterHost
	for i := range ih.engines {
		for j, e := range ih.engines[i] {
			if e != nil {
				out = append(out, e)
				ih.engines[i][j] = nil
			}
		}
	}
	return out
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// members returns the global ranks of path p's engine in its order: this
// rank's rail (hierarchical; rail members are in group order, so this
// rank's index among them is its host's), or every rank (flat).
func (ih *interHost) members(p hostPath) []int {
	if p == pathHier {
		return ih.railRanks
	}
	return ih.allRanks
}

// closeAll closes the engines, concurrently.
func closeAll(engines []InterHost) error {
	errs := make([]error, len(engines))
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Go(func() { errs[i] = e.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hostCall is one HostGroups collective as the caller made it.
type hostCall struct {
	op      Op
	in, out backend.DevicePtr
	count   int // as the Comm's methods take it
	dtype   backend.DType
	red     backend.ReduceOp // all-reduce and reduce-scatter
}

// start checks a call, picks its path and enqueues it: on one host the
// Comm's own call, flat the engine's, otherwise hier with the rail's
// engine. hier calls check right before its first step on the engine: the
// call check across hosts (hostcheck.go).
func (h *HostGroups) start(ctx context.Context, s backend.Stream, c hostCall,
	hier func(e InterHost, check func() error) error) (*HostWork, error) {
	bad := func(format string, args ...any) error {
		return backend.Errorf(backend.CodeInvalidArgument, "collective: host groups: %v: "+format, append([]any{c.op}, args...)...)
	}
	switch {
	case s == nil:
		return nil, bad("nil stream")
	case c.count <= 0:
		return nil, bad("count %d must be positive", c.count)
	case !c.dtype.Valid():
		return nil, bad("unsupported dtype %v", c.dtype)
	case c.count > maxCount(c.dtype) || c.count > maxCountOver(c.dtype, h.World):
		return nil, bad("count %d of %v too large (at most %d: its byte sizes would overflow)", c.count, c.dtype, min(maxCount(c.dtype), maxCountOver(c.dtype, h.World)))
	case c.op != OpAllGather && !c.red.Valid():
		return nil, bad("unsupported reduce op %v", c.red)
	}
	inN, outN := c.op.Elements(c.count, h.World)
	p := h.path(c.op, max(inN, outN)*c.dtype.Size())
	if p == pathLocal {
		if err := enqueued(h.local(ctx, s, c)); err != nil {
			return nil, err
		}
		return &HostWork{h: h, stream: s}, nil
	}
	e, err := h.engine(ctx, p, false)
	if err != nil {
		return nil, err
	}
	w := &HostWork{h: h, stream: s, e: e}
	check := func() error {
		if h.NoCallCheck {
			return nil
		}
		return h.checkCall(ctx, s, p, c, w)
	}
	if p == pathFlat {
		if err = check(); err == nil {
			err = engineCall(ctx, e, s, c)
		}
	} else {
		err = hier(e, check)
	}
	if err == nil && w.check != nil {
		// The call ends when its check does too.
		err = w.check.join(s)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// checkCall starts the call check of c for w, right before the call's
// next step on s: in a job of at most MeshMaxRanks ranks, this rank's
// record goes to every rank on the mesh (hostmesh.go); in a larger one,
// and on the hierarchical path to carry the comm's status word, the
// records are all-gathered on path p's check communicator beside that
// step (hostcheck.go).
func (h *HostGroups) checkCall(ctx context.Context, s backend.Stream, p hostPath, c hostCall, w *HostWork) error {
	ih := h.ih
	onMesh := h.World <= MeshMaxRanks
	var e InterHost
	var d backend.Device
	if !onMesh || p == pathHier {
		var err error
		if d, err = h.Device(ctx); err != nil {
			return err
		}
		if e, err = h.engine(ctx, p, true); err != nil {
			return err
		}
	}
	members := ih.members(p)
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if ih.err != nil {
		return fmt.Errorf("%w: %w", ErrCommFailed, ih.err)
	}
	if onMesh && ih.mesh == nil {
		m, err := formMesh(ctx, ih.job, h.Rank, h.World, ih.timeout)
		if err != nil {
			return err
		}
		ih.mesh = m
	}
	if ih.seq++; ih.seq == 0 {
		ih.seq = 1
	}
	rec := hostRecord{seq: ih.seq, op: c.op, dtype: c.dtype, red: c.red, path: p, count: uint64(c.count)}
	if onMesh {
		ih.mesh.send(ctx, rec, ih.timeout)
		w.mesh, w.mine = ih.mesh, rec
		if p != pathHier {
			return nil
		}
	}
	if ih.check == nil {
		var err error
		if ih.check, err = newCallCheck(ctx, d, h.World); err != nil {
			return fmt.Errorf("collective: host groups: memory for the call check: %w", err)
		}
	}
	var status backend.DevicePtr
	if p == pathHier {
		status = h.Comm.statusWord()
	}
	var err error
	w.check, err = ih.check.enqueue(ctx, s, e, rec, status, members, slices.Index(members, h.Rank))
	return err
}

// local is c on the one host's Comm.
func (h *HostGroups) local(ctx context.Context, s backend.Stream, c hostCall) (*Work, error) {
	k := h.Comm
	switch c.op {
	case OpAllReduce:
		return k.AllReduce(ctx, s, c.in, c.count, c.dtype, c.red, k.SelectReduction(OpAllReduce, c.count, c.dtype, c.red), Output(c.out))
	case OpReduceScatter:
		return k.ReduceScatter(ctx, s, c.in, c.out, c.count, c.dtype, c.red, k.SelectAlgo(OpReduceScatter, c.count, c.dtype))
	}
	return k.AllGather(ctx, s, c.in, c.out, c.count, c.dtype, k.SelectAlgo(OpAllGather, c.count, c.dtype))
}

// engineCall is c on an inter-host engine.
func engineCall(ctx context.Context, e InterHost, s backend.Stream, c hostCall) error {
	switch c.op {
	case OpAllReduce:
		return e.AllReduce(ctx, s, c.in, c.out, c.count, c.dtype, c.red)
	case OpReduceScatter:
		return e.ReduceScatter(ctx, s, c.in, c.out, c.count, c.dtype, c.red)
	}
	return e.AllGather(ctx, s, c.in, c.out, c.count, c.dtype)
}

// AllReduce reduces count elements of dtype at in across every rank of
// the job with op into out (in place when out == in), enqueued on s.
// Hierarchical where every host has the same number of ranks (2 or more)
// with a comm: a reduce-scatter inside each host, an all-reduce of each
// rank's slice across hosts among the ranks of its local index, an
// all-gather inside each host; a remainder of fewer elements than ranks
// per host is all-reduced inside the host, then across. Otherwise the
// inter-host engine across every rank (flat).
func (h *HostGroups) AllReduce(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) (*HostWork, error) {
	return h.start(ctx, s, hostCall{op: OpAllReduce, in: in, out: out, count: count, dtype: dtype, red: op}, func(e InterHost, check func() error) error {
		c, g, lr, size := h.Comm, h.LocalWorld(), h.LocalRank, dtype.Size()
		blk := count / g
		if blk > 0 {
			mine := out.Add(lr * blk * size)
			if err := enqueued(c.ReduceScatter(ctx, s, in, mine, blk, dtype, op, c.SelectAlgo(OpReduceScatter, blk, dtype))); err != nil {
				return err
			}
			if err := check(); err != nil {
				return err
			}
			if err := e.AllReduce(ctx, s, mine, mine, blk, dtype, op); err != nil {
				return err
			}
			if err := enqueued(c.AllGather(ctx, s, mine, out, blk, dtype, c.SelectAlgo(OpAllGather, blk, dtype))); err != nil {
				return err
			}
		}
		tail := count - blk*g
		if tail == 0 {
			return nil
		}
		off := blk * g * size
		if err := enqueued(c.AllReduce(ctx, s, in.Add(off), tail, dtype, op, c.SelectReduction(OpAllReduce, tail, dtype, op), Output(out.Add(off)))); err != nil {
			return err
		}
		if blk == 0 {
			if err := check(); err != nil {
				return err
			}
		}
		return e.AllReduce(ctx, s, out.Add(off), out.Add(off), tail, dtype, op)
	})
}

// ReduceScatter reduces with op, across every rank of the job, World
// blocks of count elements at in (block r at in + r*count, r a global
// rank) and writes the reduction of block Rank to out, enqueued on s.
// Hierarchical as AllReduce: the blocks are first reordered by local
// index (device copies into scratch memory), reduce-scattered inside each
// host, then reduce-scattered across hosts.
func (h *HostGroups) ReduceScatter(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) (*HostWork, error) {
	return h.start(ctx, s, hostCall{op: OpReduceScatter, in: in, out: out, count: count, dtype: dtype, red: op}, func(e InterHost, check func() error) error {
		c, size := h.Comm, dtype.Size()
		row := len(h.Groups) * count // elements per local index
		tmp, err := h.scratch(ctx, h.World*count*size)
		if err != nil {
			return err
		}
		// tmp holds, for local index l, the blocks of the ranks of index l
		// on every host, in host order.
		if err := h.reorder(s, tmp, in, count*size, true); err != nil {
			return err
		}
		mine := tmp.Add(h.LocalRank * row * size)
		if err := enqueued(c.ReduceScatter(ctx, s, tmp, mine, row, dtype, op, c.SelectAlgo(OpReduceScatter, row, dtype))); err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
		return e.ReduceScatter(ctx, s, mine, out, count, dtype, op)
	})
}

// AllGather gathers count elements at in from every rank of the job into
// out, rank r's at out + r*count (r a global rank), enqueued on s.
// Hierarchical: across hosts among the ranks of this local index, inside
// each host, then the blocks are put in rank order (device copies).
func (h *HostGroups) AllGather(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType) (*HostWork, error) {
	return h.start(ctx, s, hostCall{op: OpAllGather, in: in, out: out, count: count, dtype: dtype}, func(e InterHost, check func() error) error {
		c, size := h.Comm, dtype.Size()
		row := len(h.Groups) * count
		tmp, err := h.scratch(ctx, h.World*count*size)
		if err != nil {
			return err
		}
		mine := tmp.Add(h.LocalRank * row * size)
		if err := check(); err != nil {
			return err
		}
		if err := e.AllGather(ctx, s, in, mine, count, dtype); err != nil {
			return err
		}
		if err := enqueued(c.AllGather(ctx, s, mine, tmp, row, dtype, c.SelectAlgo(OpAllGather, row, dtype))); err != nil {
			return err
		}
		return h.reorder(s, out, tmp, count*size, false)
	})
}

// reorder copies blocks of n bytes between rank order (block r of rank r)
// and local-index order (block l*hosts + host of the rank with local
// index l on that host): into local-index order at dst when toLocal, back
// to rank order otherwise. Enqueued on s.
func (h *HostGroups) reorder(s backend.Stream, dst, src backend.DevicePtr, n int, toLocal bool) error {
	hosts := len(h.Groups)
	for hi, g := range h.Groups {
		for l, r := range g.Ranks {
			local := (l*hosts + hi) * n
			from, to := src.Add(r*n), dst.Add(local)
			if !toLocal {
				from, to = src.Add(local), dst.Add(r*n)
			}
			if err := s.CopyAsync(to, from, n); err != nil {
				return fmt.Errorf("collective: host groups: reordering blocks: %w", err)
			}
		}
	}
	return nil
}

// scratch returns device memory of at least n bytes on this rank's
// device, kept for later calls. A smaller one it replaces stays allocated
// until Close: work of an earlier call may still be queued on it.
func (h *HostGroups) scratch(ctx context.Context, n int) (backend.DevicePtr, error) {
	ih := h.ih
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if k := len(ih.scratch); k > 0 && ih.scratch[k-1].Size() >= n {
		return ih.scratch[k-1].Ptr(), nil
	}
	a, err := h.Comm.Device().Alloc(ctx, n)
	if err != nil {
		return 0, fmt.Errorf("collective: host groups: scratch memory: %w", err)
	}
	ih.scratch = append(ih.scratch, a)
	return a.Ptr(), nil
}

// closeInterHost releases the engines and the scratch memory.
func (h *HostGroups) closeInterHost() error {
	ih := h.ih
	if ih == nil {
		return nil
	}
	ih.mu.Lock()
	defer ih.mu.Unlock()
	errs := []error{closeAll(ih.takeEngines())}
	for _, done := range ih.aborts {
		errs = append(errs, <-done)
	}
	ih.aborts = nil
	errs = closing.Field(errs, &ih.check)
	errs = closing.Field(errs, &ih.mesh)
	for _, a := range ih.scratch {
		errs = append(errs, a.Close())
	}
	ih.scratch = nil
	errs = closing.Field(errs, &ih.own)
	return errors.Join(errs...)
}
