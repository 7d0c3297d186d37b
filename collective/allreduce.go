package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/connectivity"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric"
)

// Algo is an all-reduce algorithm.
type Algo uint8

// The algorithms of the reference.
const (
	// None: the comm would not beat the vendor library; AllReduce then
	// takes the fallback path (the backend's own all-reduce where it has
	// one, else the comm's kernels chunk by chunk).
	None Algo = iota
	// OneShot: every rank reads every peer's input and reduces it all.
	OneShot
	// TwoShot: reduce-scatter then all-gather.
	TwoShot
	// HCM: reduce inside the quad, then exchange with the cross-quad
	// neighbour (hybrid cube mesh only).
	HCM
	// Pipeline: the message chunk by chunk through the peers' signal
	// pads, many chunks in flight at once. It needs no symmetric buffer,
	// so it takes any size. At world 2 every rank pushes its input and
	// reduces what arrives (as many bytes as one-shot); from three ranks
	// on each chunk is reduce-scattered and all-gathered, so a rank sends
	// 2(n-1)/n of the message as a ring does (kernels/abi.go, "Pipeline"
	// and "Pipeline, scattered"). For the data-movement collectives it is
	// their pipelined path: what each peer needs, chunk by chunk through
	// the same slots, at any size in one launch.
	Pipeline
	// Direct: the data-movement collectives' kernels (reduce-scatter,
	// all-gather, broadcast, all-to-all): every rank copies its input into
	// its symmetric buffer and reads what it needs from the peers' buffers
	// (kernels/abi.go). Not an all-reduce algorithm.
	Direct
	// Copy: all-gather, broadcast and all-to-all on the copy engines, for
	// a call whose input lies in the caller's symmetric buffer at the same
	// offset on every rank. The ranks agree on the call (a one-block
	// kernel, kernels.MoverSync), each copies what it needs straight from
	// its peers' buffers into its output (backend.Stream.CopyAsync), and
	// a second agreement tells every rank that its peers have finished
	// reading its input. No SM moves data. Not an all-reduce algorithm.
	Copy
)

// Algos lists the all-reduce kernel algorithms.
var Algos = []Algo{OneShot, TwoShot, HCM, Pipeline}

// algoNames are the String names, by value; algoKernels the kernels'
// names (None has none; Direct's are the operations').
var (
	algoNames = [...]string{None: "none", OneShot: "oneshot", TwoShot: "twoshot", HCM: "hcm", Pipeline: "pipeline", Direct: "direct",
		Copy: "copy"}
	algoKernels = [...]kernels.Algo{OneShot: kernels.OneShot, TwoShot: kernels.TwoShot, HCM: kernels.HCM, Pipeline: kernels.Pipeline}
)

// String names the algorithm as tables and flags spell it.
func (a Algo) String() string {
	if int(a) < len(algoNames) {
		return algoNames[a]
	}
	return "none"
}

// ParseAlgo parses "none", "oneshot", "twoshot", "hcm", "pipeline",
// "direct" or "copy" (any case, dashes ignored).
func ParseAlgo(s string) (Algo, error) {
	k := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	for a, name := range algoNames {
		if name == k {
			return Algo(a), nil
		}
	}
	return None, backend.Errorf(backend.CodeInvalidArgument, "unknown algorithm %q (none, oneshot, twoshot, hcm, pipeline, direct, copy)", s)
}

// kernel is the all-reduce kernel of a (OneShot, TwoShot, HCM, Pipeline).
func (a Algo) kernel() kernels.Algo {
	if int(a) < len(algoKernels) && algoKernels[a] != "" {
		return algoKernels[a]
	}
	return kernels.HCM
}

// Capacity is the largest count of dtype elements algo can reduce in one
// call with this comm's buffer. Pipeline uses no buffer: its capacity is
// bounded only by the int type.
func (c *Comm) Capacity(algo Algo, dtype backend.DType) int {
	if !dtype.Valid() {
		return 0
	}
	if algo == Pipeline {
		return maxCount(dtype) // no buffer: only the bound of every call
	}
	if algo == HCM {
		return kernels.HCMPartialOffset(c.opts.BufferSize) / dtype.Size()
	}
	return c.opts.BufferSize / dtype.Size()
}

// SelectAllReduceAlgo returns the algorithm expected to be fastest for count
// elements of dtype, or None when the comm would not beat the vendor library
// (not rendezvoused, topology unusable, input larger than the buffer,
// unsupported dtype).
func (c *Comm) SelectAllReduceAlgo(count int, dtype backend.DType) Algo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initialized || !dtype.Valid() || count <= 0 || count > maxCount(dtype) {
		return None
	}
	bytes := count * dtype.Size()
	switch c.topo {
	case connectivity.HybridCubeMesh:
		if count <= c.Capacity(HCM, dtype) {
			return HCM
		}
		return None
	case connectivity.FullyConnected:
		if a := c.tab.Select(bytes); count <= c.Capacity(a, dtype) {
			return a
		}
		return None
	}
	return None
}

// SelectReduction is SelectAlgo for a call that reduces with red: an
// average (backend.Avg) all-reduce over the thresholds' AvgMax selects
// None, where the vendor library's average beats the kernels' sum and
// division.
func (c *Comm) SelectReduction(op Op, count int, dtype backend.DType, red backend.ReduceOp) Algo {
	a := c.SelectAlgo(op, count, dtype)
	if op != OpAllReduce || red != backend.Avg || a == None {
		return a
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tab.averaged(count*dtype.Size(), a)
}

// Work is the handle of an enqueued all-reduce. The collective runs on the
// caller's stream, so work enqueued on that stream afterwards is already
// ordered after it.
type Work struct {
	c      *Comm
	stream backend.Stream
	done   backend.Event
	// deadline is the call's: its context's, else the comm's timeout from
	// the call.
	deadline time.Time
}

func (w *Work) record(ctx context.Context) error {
	ev, err := w.c.dev.NewEvent(ctx, false)
	if err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	if err := w.stream.Record(ev); err != nil {
		_ = ev.Close()
		return fmt.Errorf("collective: %w", err)
	}
	w.done = ev
	return nil
}

// Wait makes work enqueued on s after this call wait for the collective,
// without blocking the host. On the stream the collective ran on it costs
// nothing; for another stream it records an event on the collective's
// stream (at once if the call had WithEvent, else now — which also orders s
// after anything enqueued on that stream since).
func (w *Work) Wait(ctx context.Context, s backend.Stream) error {
	if s == w.stream {
		return nil
	}
	if w.done == nil {
		if err := w.record(ctx); err != nil {
			return err
		}
	}
	return s.WaitEvent(w.done)
}

// Synchronize blocks the host until the collective has finished, or the
// caller's context ends, and returns its error: a kernel timeout
// (ErrTimeout naming the rank that did not arrive), a mismatch, the
// stream's error, or, when ctx ends first, a timeout or cancellation of its
// own. It never waits past ctx's deadline. The kernels give up at the
// deadline they were launched with and leave their account in the status
// word; when ctx ends first and that account is already there, it is the
// error. A call whose Synchronize ended early still runs on the device
// until its kernels finish or give up.
func (w *Work) Synchronize(ctx context.Context) error {
	var err error
	if w.done != nil {
		err = w.done.Synchronize(ctx)
	} else {
		err = w.stream.Synchronize(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			if serr := w.c.CheckStatus(); serr != nil {
				return serr
			}
			err = w.c.nameLate(err)
			if !time.Now().Before(w.deadline) || errors.Is(err, ErrMismatch) {
				err = w.c.overran(err)
			}
		}
		return fmt.Errorf("collective: waiting for the collective: %w", err)
	}
	return w.c.CheckStatus()
}

// Close releases the work's event.
func (w *Work) Close() error {
	if w.done != nil {
		err := w.done.Close()
		w.done = nil
		return err
	}
	return nil
}

// CallOption adjusts one AllReduce call.
type CallOption func(*call)

type call struct {
	out       backend.DevicePtr
	hasOut    bool
	event     bool
	noConfirm bool
}

// callOf applies opts in the comm's scratch call, so that a call's
// options allocate nothing; the caller holds c.mu.
func (c *Comm) callOf(opts []CallOption) call {
	c.opt = call{}
	for _, o := range opts {
		o(&c.opt)
	}
	return c.opt
}

// Output makes the call write its result to out instead of in place.
func Output(out backend.DevicePtr) CallOption {
	return func(c *call) { c.out, c.hasOut = out, true }
}

// WithoutConfirm leaves out the ranks' confirmation after a call that
// goes through the backend's vendor library (algo None): the call costs
// what the library's does, and a rank that makes it after its peers gave
// up on it and aborted may return a result they never contributed to (see
// "An aborted peer's NCCL kernel" in docs/RELIABILITY.md). It is for
// measuring the vendor library itself, as intranode bench's nccl rows do.
func WithoutConfirm() CallOption { return func(c *call) { c.noConfirm = true } }

// WithEvent records an event after the collective so Work.Wait can order
// other streams after it (costs an event record per call).
func WithEvent() CallOption { return func(c *call) { c.event = true } }

// AllReduce reduces count elements of dtype at buf across the group with op,
// in place (or into Output), enqueued on stream s. algo None takes the
// fallback path, which handles any size; a kernel algorithm fails with
// ErrTooLarge when the input does not fit the buffer. Inputs and outputs
// are device memory of this rank's device; they may be the comm's own
// symmetric buffer (GetBuffer(rank…)), which saves a copy. op Avg is
// the sum divided by World: on the comm's kernels their sum followed by
// the division kernel (kernels.Divide) on the output, on the vendor
// library its own average.
func (c *Comm) AllReduce(ctx context.Context, s backend.Stream, buf backend.DevicePtr, count int, dtype backend.DType,
	op backend.ReduceOp, algo Algo, opts ...CallOption) (*Work, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.callOf(opts)
	out := buf
	if cl.hasOut {
		out = cl.out
	}
	if err := c.usableFor(algo); err != nil {
		return nil, err
	}
	if c.calls.failed != nil {
		return nil, fmt.Errorf("%w: %w", ErrCommFailed, c.calls.failed)
	}
	if s == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: nil stream")
	}
	if !dtype.Valid() || !op.Valid() {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: unsupported dtype %v or op %v", dtype, op)
	}
	if count <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: count %d must be positive", count)
	}
	if count > maxCount(dtype) {
		return nil, backend.Wrap(backend.CodeInvalidArgument, ErrTooLarge,
			fmt.Sprintf("collective: count %d of %v too large (at most %d: its byte sizes would overflow)", count, dtype, maxCount(dtype)))
	}
	if algo == HCM && c.topo != connectivity.HybridCubeMesh {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: HCM needs a hybrid cube mesh, topology is %v", c.topo)
	}
	if algo > Pipeline {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: unknown algorithm %d", algo)
	}
	if err := c.checkRanges(buf, count*dtype.Size(), out, count*dtype.Size()); err != nil {
		return nil, fmt.Errorf("collective: all-reduce: %w", err)
	}
	timeout := symmetric.TimeoutFor(ctx, c.opts.Timeout)
	if algo == None {
		if err := c.fallback(ctx, s, buf, out, count, dtype, op, uint64(timeout), cl); err != nil {
			return nil, err
		}
	} else {
		if algo == OneShot && c.inOwnBuffer(out, count*dtype.Size()) {
			return nil, backend.Errorf(backend.CodeInvalidArgument,
				"collective: one-shot cannot write its output into this rank's symmetric buffer (peers are still reading it); use TwoShot or another output")
		}
		if capN := c.Capacity(algo, dtype); count > capN {
			return nil, fmt.Errorf("%w: %d %v elements (%d bytes) but %v holds at most %d with a %d-byte buffer",
				ErrTooLarge, count, dtype, count*dtype.Size(), algo, capN, c.opts.BufferSize)
		}
		if err := c.launch(ctx, s, algo, buf, out, count, dtype, op, uint64(timeout)); err != nil {
			return nil, err
		}
		if err := c.divideIfAvg(s, op, out, count, dtype, uint64(timeout)); err != nil {
			return nil, err
		}
	}
	return c.served(ctx, s, cl)
}

// served counts a call that was enqueued on s and returns its Work, with
// the event the call asked for.
func (c *Comm) served(ctx context.Context, s backend.Stream, cl call) (*Work, error) {
	usage.Add(1)
	// The caller's own deadline where it has one, not now plus what is
	// left of it: a wait that ends at that deadline must find the call
	// overrun (Synchronize), however soon after it the host wakes.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(symmetric.TimeoutFor(ctx, c.opts.Timeout))
	}
	w := &Work{c: c, stream: s, deadline: deadline}
	if cl.event {
		if err := w.record(ctx); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// launch enqueues one all-reduce kernel call (for Avg the sum, which
// divideIfAvg completes; the call's fingerprint keeps Avg, so ranks
// averaging and ranks summing are told apart); the caller holds c.mu.
func (c *Comm) launch(ctx context.Context, s backend.Stream, algo Algo, in, out backend.DevicePtr, count int, dtype backend.DType,
	op backend.ReduceOp, timeoutNs uint64) error {
	args := kernels.AllReduceArgs{Input: in, Output: out, Count: uint64(count), DType: dtype, Op: op.Reduced(), TimeoutNs: timeoutNs}
	if algo == HCM {
		p := c.hcm[c.rank]
		args.Extra = kernels.PackHCM([3]int{p[0], p[1], p[2]}, p[3], kernels.HCMPartialOffset(c.opts.BufferSize))
	}
	cfg := LaunchConfig(c.b.Name(), algo, count*dtype.Size(), c.world)
	return c.enqueue(ctx, s, algo.kernel(), cfg, args, callKey{count: count, op: op})
}

// callKey is what the Call of a launch fingerprints besides its algorithm
// and dtype: for an all-reduce its count and op; for a data-movement
// collective the whole call's count per rank and, for a broadcast, the root
// in place of the op, so that ranks whose calls differ only in a later
// chunk or in the root are told apart before data moves.
type callKey struct {
	count int
	op    backend.ReduceOp
}

// enqueue launches the kernel of algorithm a with args, whose comm-wide
// fields (tables, rank, world, status word, the next Call, from key) it
// fills; the caller holds c.mu.
func (c *Comm) enqueue(ctx context.Context, s backend.Stream, a kernels.Algo, cfg backend.LaunchConfig,
	args kernels.AllReduceArgs, key callKey) error {
	fn, err := c.kernelFunction(a, args.DType)
	if err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	args.Bufs, args.Pads = c.mem.BufferTable(), c.mem.SignalPadTable()
	args.Rank, args.World = uint32(c.rank), uint32(c.world)
	// The pipelined path's launches carry kernels.InfoPipelined: ranks
	// on it and on another path are told apart like calls that differ.
	args.Status, args.Call = c.status.Ptr(), c.calls.next(kernels.LaunchInfo(a, args.DType, key.op, args.Extra), key.count)
	if c.mem.SharesDevice() {
		// Every rank's blocks must be resident at once on the one device
		// (a block waits for its peers' blocks): the group's grids
		// together stay within sharedDeviceBlocks.
		cfg.Grid.X = max(1, min(cfg.Grid.X, uint32(sharedDeviceBlocks/c.world)))
	}
	argv := args.Put(&c.argv)
	if err := c.mem.Launch(ctx, func() error { return s.Launch(fn, cfg, argv...) }); err != nil {
		return fmt.Errorf("collective: launching %v: %w", a, err)
	}
	return nil
}

// fallback reduces any size: through the backend's own all-reduce when it
// has one (followed by the ranks' confirmation unless cl leaves it out),
// otherwise chunk by chunk through the comm's kernels.
func (c *Comm) fallback(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int, dtype backend.DType,
	op backend.ReduceOp, timeoutNs uint64, cl call) error {
	// The vendor library refuses ranks that share a device (NCCL:
	// "invalid usage"), so those take the comm's kernels.
	if fb, ok := c.b.(FallbackAllReducer); ok && (c.mem == nil || !c.mem.SharesDevice()) {
		err := fb.FallbackAllReduce(ctx, s, c, in, out, count, dtype, op)
		if err == nil {
			return c.confirmVendor(ctx, s, cl, timeoutNs)
		}
		if !errors.Is(err, backend.ErrUnavailable) || c.mem == nil {
			return err
		}
		// No vendor library on this machine: the kernels still work.
		c.log.Debug("vendor all-reduce unavailable; using the comm's kernels", "err", err)
	}
	algo := TwoShot
	if c.topo == connectivity.HybridCubeMesh {
		algo = HCM
	}
	chunk := c.Capacity(algo, dtype)
	size := dtype.Size()
	for off := 0; off < count; off += chunk {
		if err := chunkDeadline(ctx, off, count); err != nil {
			return fmt.Errorf("collective: all-reduce: %w", err)
		}
		n := min(chunk, count-off)
		a := algo
		if algo != HCM {
			a = c.tab.Select(n * size)
			if a == OneShot && c.inOwnBuffer(out.Add(off*size), n*size) {
				a = TwoShot
			}
		}
		if err := c.launch(ctx, s, a, in.Add(off*size), out.Add(off*size), n, dtype, op, timeoutNs); err != nil {
			return err
		}
	}
	return c.divideIfAvg(s, op, out, count, dtype, timeoutNs)
}

// divideIfAvg completes an average that the comm's kernels have summed
// into the count elements at out: it enqueues the division kernel
// (kernels.Divide) by the world size on s. For any other op it does
// nothing. The caller holds c.mu.
func (c *Comm) divideIfAvg(s backend.Stream, op backend.ReduceOp, out backend.DevicePtr, count int, dtype backend.DType,
	timeoutNs uint64) error {
	if op != backend.Avg {
		return nil
	}
	fn, err := c.kernelFunction(kernels.Divide, dtype)
	if err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	args := kernels.AllReduceArgs{Input: out, Output: out, Count: uint64(count), World: uint32(c.world), DType: dtype,
		Status: c.status.Ptr(), TimeoutNs: timeoutNs}
	cfg := divideConfig(count * dtype.Size())
	// Ranks sharing a device: a division launched early would hold its
	// blocks, waiting for the sum, where a peer's sum may need them.
	cfg.Early = !c.mem.SharesDevice()
	if err := s.Launch(fn, cfg, args.Put(&c.argv)...); err != nil {
		return fmt.Errorf("collective: launching %v: %w", kernels.Divide, err)
	}
	return nil
}

// confirmVendor follows a call the backend's vendor library has just
// enqueued on s with the ranks' confirmation of it (symmetric.Memory's
// Confirm): a rank whose vendor call completed although a peer gave up on
// it and aborted (NCCL's aborted kernels still post their steps, so the
// late rank's call finishes on stale buffers) then fails the call, naming
// that peer, instead of returning its result. Without symmetric memory (a
// comm refused but kept for the fallback) there is nothing to confirm
// through; a call made WithoutConfirm has none. The caller holds c.mu.
func (c *Comm) confirmVendor(ctx context.Context, s backend.Stream, cl call, timeoutNs uint64) error {
	if cl.noConfirm || c.mem == nil || c.status == nil {
		return nil
	}
	if err := c.mem.Confirm(ctx, s, c.status.Ptr(), timeoutNs); err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	return nil
}

// FallbackAllReducer is implemented by backends that have their own
// all-reduce for what the comm's kernels would not do faster (NCCL on
// CUDA). The comm passes itself so the backend can bootstrap through its
// store and ranks.
type FallbackAllReducer interface {
	FallbackAllReduce(ctx context.Context, s backend.Stream, c *Comm, in, out backend.DevicePtr, count int, dtype backend.DType, op backend.ReduceOp) error
}

// Barrier synchronises the listed ranks (every rank when none are given);
// every listed rank must call it with the same list.
func (c *Comm) Barrier(ctx context.Context, ranks ...int) error {
	c.mu.Lock()
	mem := c.mem
	ok := c.initialized
	c.mu.Unlock()
	if !ok {
		return ErrNotInitialized
	}
	if len(ranks) == 0 {
		return mem.Barrier(ctx, kernels.KernelChannels)
	}
	return mem.BarrierRanks(ctx, kernels.KernelChannels, ranks)
}

// GetBuffer returns a view of count elements of dtype at byte offset off in
// rank r's symmetric buffer.
func (c *Comm) GetBuffer(r, count int, dtype backend.DType, off int) (symmetric.View, error) {
	c.mu.Lock()
	mem := c.mem
	c.mu.Unlock()
	if mem == nil {
		return symmetric.View{}, ErrNotInitialized
	}
	return mem.GetBuffer(r, count, dtype, off)
}

// inOwnBuffer reports whether [p, p+n) overlaps this rank's symmetric
// buffer.
func (c *Comm) inOwnBuffer(p backend.DevicePtr, n int) bool {
	lo := c.mem.Buffer(c.rank)
	hi := lo.Add(c.mem.BufferSize())
	return p < hi && p.Add(n) > lo
}
