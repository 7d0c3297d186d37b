package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric"
)

// Op is a collective operation, named as nccl-tests names its binaries.
type Op uint8

// The collective operations.
const (
	OpAllReduce Op = iota
	OpReduceScatter
	OpAllGather
	OpBroadcast
	OpAllToAll
)

// Ops lists every collective operation.
var Ops = []Op{OpAllReduce, OpReduceScatter, OpAllGather, OpBroadcast, OpAllToAll}

// opNames are the String names, by value.
var opNames = [...]string{OpAllReduce: "all_reduce", OpReduceScatter: "reduce_scatter", OpAllGather: "all_gather",
	OpBroadcast: "broadcast", OpAllToAll: "alltoall"}

// Reduces reports whether the operation combines its ranks' inputs with a
// reduction operator (the all-reduce and the reduce-scatter); the others
// copy.
func (o Op) Reduces() bool { return o == OpAllReduce || o == OpReduceScatter }

// String is the operation's nccl-tests name: all_reduce, reduce_scatter,
// all_gather, broadcast, alltoall.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp parses an operation name (String's, with or without the
// underscore; "all_to_all" too).
func ParseOp(s string) (Op, error) {
	k := strings.ReplaceAll(strings.ToLower(s), "_", "")
	for _, o := range Ops {
		if strings.ReplaceAll(o.String(), "_", "") == k {
			return o, nil
		}
	}
	return 0, backend.Errorf(backend.CodeInvalidArgument, "unknown collective %q (all_reduce, reduce_scatter, all_gather, broadcast, alltoall)", s)
}

// BusFactor is nccl-tests' bus-bandwidth factor for the operation over
// world ranks: bus bandwidth = algorithm bandwidth × BusFactor.
func (o Op) BusFactor(world int) float64 {
	n := float64(world)
	switch o {
	case OpAllReduce:
		return 2 * (n - 1) / n
	case OpReduceScatter, OpAllGather, OpAllToAll:
		return (n - 1) / n
	}
	return 1
}

// Elements returns how many elements of a rank's input and output a call
// of the operation with this count (per rank, as the Comm methods take it)
// spans over world ranks.
func (o Op) Elements(count, world int) (in, out int) {
	switch o {
	case OpReduceScatter:
		return count * world, count
	case OpAllGather:
		return count, count * world
	case OpAllToAll:
		return count * world, count * world
	}
	return count, count
}

// opKernels are the operations' data-movement kernels (all-reduce has
// none: its algorithms name them).
var opKernels = [...]kernels.Algo{OpReduceScatter: kernels.ReduceScatter, OpAllGather: kernels.AllGather,
	OpBroadcast: kernels.Broadcast, OpAllToAll: kernels.AllToAll}

// kernel is the operation's data-movement kernel ("" for all-reduce).
func (o Op) kernel() kernels.Algo {
	if int(o) < len(opKernels) {
		return opKernels[o]
	}
	return ""
}

// FallbackMover is implemented by backends with their own data-movement
// collectives for the sizes where the comm's kernels are not the fastest
// (NCCL on CUDA). in and out follow the Comm methods; root is the
// broadcast's.
type FallbackMover interface {
	FallbackMove(ctx context.Context, s backend.Stream, c *Comm, op Op, in, out backend.DevicePtr, count int, dtype backend.DType,
		red backend.ReduceOp, root int) error
}

// SelectAlgo returns the path for one call of op with count elements per
// rank: Pipeline (the comm's pipelined kernels), Direct (the comm's other
// kernels) or None (the backend's own library, where the kernels would
// not be faster). For OpAllReduce it is SelectAllReduceAlgo.
func (c *Comm) SelectAlgo(op Op, count int, dtype backend.DType) Algo {
	if op == OpAllReduce {
		return c.SelectAllReduceAlgo(count, dtype)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initialized || !dtype.Valid() || count <= 0 || count > maxCount(dtype) {
		return None
	}
	in, out := op.Elements(count, c.world)
	return c.tab.SelectMover(op, max(in, out)*dtype.Size())
}

// SelectMove is SelectAlgo for a call whose input is at in: Copy where
// the input lies in this rank's symmetric buffer and the copy engines are
// the fastest path at that size (Thresholds.Copy), else SelectAlgo's
// choice. Every rank must then place its input at the same offset of its
// buffer, or the call fails as a mismatch.
func (c *Comm) SelectMove(op Op, in backend.DevicePtr, count int, dtype backend.DType) Algo {
	a := c.SelectAlgo(op, count, dtype)
	if op == OpAllReduce || !dtype.Valid() || count <= 0 || count > maxCount(dtype) {
		return a
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inN, outN := op.Elements(count, c.world)
	if w, ok := c.tab.Copy[op]; ok && w.Contains(max(inN, outN)*dtype.Size()) && c.copyable(op, in, inN*dtype.Size()) == nil {
		return Copy
	}
	return a
}

// ReduceScatter reduces with op, across the group, World blocks of count
// elements at in (block r at in + r*count elements) and writes the
// reduction of block Rank to out (count elements), enqueued on s. In place
// when out is in's block Rank. algo is Direct (the comm's kernels, any
// count: past the buffer, chunk by chunk), Pipeline (the comm's pipelined
// kernel, any count in one launch, no buffer) or None (the backend's own
// library where it has one, else the kernels). op Avg divides the
// rank's block by World after the sum, as AllReduce does.
func (c *Comm) ReduceScatter(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp, algo Algo, opts ...CallOption) (*Work, error) {
	return c.move(ctx, s, moveCall{op: OpReduceScatter, in: in, out: out, count: count, dtype: dtype, red: op}, algo, opts)
}

// AllGather gathers count elements at in from every rank into out, rank
// r's at out + r*count elements, enqueued on s. In place when in is out's
// block Rank. algo as for ReduceScatter.
func (c *Comm) AllGather(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, algo Algo, opts ...CallOption) (*Work, error) {
	return c.move(ctx, s, moveCall{op: OpAllGather, in: in, out: out, count: count, dtype: dtype}, algo, opts)
}

// Broadcast copies count elements at buf on rank root to buf on every rank
// (or into Output), enqueued on s. algo as for ReduceScatter.
func (c *Comm) Broadcast(ctx context.Context, s backend.Stream, buf backend.DevicePtr, count int,
	dtype backend.DType, root int, algo Algo, opts ...CallOption) (*Work, error) {
	return c.move(ctx, s, moveCall{op: OpBroadcast, in: buf, out: buf, count: count, dtype: dtype, root: root}, algo, opts)
}

// AllToAll sends block r of in (count elements at in + r*count) to rank r,
// which receives it as block Rank of out; every rank sends and receives
// World blocks, enqueued on s. In place when in == out. algo as for
// ReduceScatter.
func (c *Comm) AllToAll(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, algo Algo, opts ...CallOption) (*Work, error) {
	return c.move(ctx, s, moveCall{op: OpAllToAll, in: in, out: out, count: count, dtype: dtype}, algo, opts)
}

// copyable says why a call of op whose input is the n bytes at in cannot
// take the Copy path, or nil; the caller holds c.mu.
func (c *Comm) copyable(op Op, in backend.DevicePtr, n int) error {
	switch {
	case op != OpAllGather && op != OpBroadcast && op != OpAllToAll:
		return fmt.Errorf("the copy engines cannot reduce")
	case c.mem == nil || !c.initialized:
		return fmt.Errorf("no symmetric buffer")
	}
	lo := c.mem.Buffer(c.rank)
	if in < lo || in.Add(n) > lo.Add(c.mem.BufferSize()) {
		return fmt.Errorf("the input (%d bytes at %#x) is not inside this rank's symmetric buffer (%d bytes at %#x), where the peers read it",
			n, uint64(in), c.mem.BufferSize(), uint64(lo))
	}
	return nil
}

// moveCall is one data-movement call as the caller made it.
type moveCall struct {
	op      Op
	in, out backend.DevicePtr
	count   int
	dtype   backend.DType
	red     backend.ReduceOp // reduce-scatter only
	root    int              // broadcast only
}

func (c *Comm) move(ctx context.Context, s backend.Stream, m moveCall, algo Algo, opts []CallOption) (*Work, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.callOf(opts)
	if cl.hasOut {
		if m.op != OpBroadcast {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "collective: %v takes its output as an argument, not Output", m.op)
		}
		m.out = cl.out
	}
	if err := c.checkMove(s, m, algo); err != nil {
		return nil, err
	}
	timeout := uint64(symmetric.TimeoutFor(ctx, c.opts.Timeout))
	done := false
	if fb, ok := c.b.(FallbackMover); ok && algo == None && (c.mem == nil || !c.mem.SharesDevice()) {
		err := fb.FallbackMove(ctx, s, c, m.op, m.in, m.out, m.count, m.dtype, m.red, m.root)
		if err == nil {
			if err := c.confirmVendor(ctx, s, cl, timeout); err != nil {
				return nil, err
			}
			done = true
		} else if !errors.Is(err, backend.ErrUnavailable) || c.mem == nil {
			return nil, err
		} else {
			c.log.Debug("vendor collective unavailable; using the comm's kernels", "op", m.op, "err", err)
		}
	}
	if !done {
		if c.mem == nil {
			return nil, fmt.Errorf("%w: %v needs the comm's kernels or a backend library, and the %s backend has none",
				ErrNotInitialized, m.op, c.b.Name())
		}
		move := c.moveChunks
		switch algo {
		case Pipeline:
			move = c.movePipelined
		case Copy:
			move = c.moveCopy
		}
		if err := move(ctx, s, m, timeout); err != nil {
			return nil, err
		}
		if err := c.divideIfAvg(s, m.red, m.out, m.count, m.dtype, timeout); err != nil {
			return nil, err
		}
	}
	return c.served(ctx, s, cl)
}

// checkMove checks a data-movement call; the caller holds c.mu.
func (c *Comm) checkMove(s backend.Stream, m moveCall, algo Algo) error {
	if err := c.usableFor(algo); err != nil {
		return err
	}
	if c.calls.failed != nil {
		return fmt.Errorf("%w: %w", ErrCommFailed, c.calls.failed)
	}
	bad := func(format string, args ...any) error {
		return backend.Errorf(backend.CodeInvalidArgument, "collective: %v: "+format, append([]any{m.op}, args...)...)
	}
	switch {
	case s == nil:
		return bad("nil stream")
	case m.op == OpAllReduce || m.op.kernel() == "":
		return bad("not a data-movement collective")
	case algo != None && algo != Direct && algo != Pipeline && algo != Copy:
		return bad("algorithm %v is an all-reduce algorithm (use Direct, Pipeline, Copy or None)", algo)
	case !m.dtype.Valid():
		return bad("unsupported dtype %v", m.dtype)
	case m.op == OpReduceScatter && !m.red.Valid():
		return bad("unsupported reduce op %v", m.red)
	case m.count <= 0:
		return bad("count %d must be positive", m.count)
	case m.count > maxCount(m.dtype):
		return bad("count %d of %v too large (at most %d: its byte sizes would overflow)", m.count, m.dtype, maxCount(m.dtype))
	case m.op == OpBroadcast && (m.root < 0 || m.root >= c.world):
		return bad("root %d out of range [0,%d)", m.root, c.world)
	}
	inN, outN := m.op.Elements(m.count, c.world)
	if m.op == OpBroadcast && c.rank != m.root {
		inN = 0 // only the root reads its input
	}
	if err := c.checkRanges(m.in, inN*m.dtype.Size(), m.out, outN*m.dtype.Size()); err != nil {
		return fmt.Errorf("collective: %v: %w", m.op, err)
	}
	if algo == Copy {
		// Every rank's input, the broadcast's too, says where the peers'
		// inputs are: at the same offset of their buffers.
		in, _ := m.op.Elements(m.count, c.world)
		if err := c.copyable(m.op, m.in, in*m.dtype.Size()); err != nil {
			return bad("Copy: %v", err)
		}
	}
	if c.mem != nil {
		for r := range c.world {
			lo := c.mem.Buffer(r)
			if m.out < lo.Add(c.mem.BufferSize()) && m.out.Add(outN*m.dtype.Size()) > lo {
				return bad("output %#x overlaps the symmetric buffer of rank %d (peers read it while the call runs)", uint64(m.out), r)
			}
		}
	}
	return nil
}

// moveChunks enqueues the comm's kernels for a data-movement call, in
// chunks of as many elements per rank as the buffer holds; the caller
// holds c.mu.
func (c *Comm) moveChunks(ctx context.Context, s backend.Stream, m moveCall, timeoutNs uint64) error {
	size := m.dtype.Size()
	// Whole 16-byte vectors in every block of every chunk but the last, so
	// that buffer parts (kernels.MoverPart) are packed.
	chunk := c.opts.BufferSize / size
	if m.op == OpReduceScatter || m.op == OpAllToAll {
		chunk = c.opts.BufferSize / c.world &^ 15 / size
	}
	chunk &^= 15
	if chunk <= 0 {
		return fmt.Errorf("%w: a %d-byte buffer holds no %v of %v over %d ranks", ErrTooLarge, c.opts.BufferSize, m.op, m.dtype, c.world)
	}
	key, extra := m.key()
	for off := 0; off < m.count; off += chunk {
		if err := chunkDeadline(ctx, off, m.count); err != nil {
			return fmt.Errorf("collective: %v: %w", m.op, err)
		}
		n := min(chunk, m.count-off)
		args := m.args(off*size, n, timeoutNs, extra)
		in, out := m.op.Elements(n, c.world)
		cfg := moverLaunchConfig(n*size, (in+out)*size, c.world)
		if err := c.enqueue(ctx, s, m.op.kernel(), cfg, args, key); err != nil {
			return err
		}
	}
	return nil
}

// movePipelined enqueues the pipelined kernel (kernels.MoverPipeline) for
// a whole data-movement call in one launch; the caller holds c.mu.
func (c *Comm) movePipelined(ctx context.Context, s backend.Stream, m moveCall, timeoutNs uint64) error {
	key, extra := m.key()
	args := m.args(0, m.count, timeoutNs, extra|kernels.MoverPipeline)
	return c.enqueue(ctx, s, m.op.kernel(), moverPipelineLaunchConfig(m.op, m.count*m.dtype.Size(), c.world), args, key)
}

// moveCopy enqueues a data-movement call on the copy engines (Copy): the
// agreement kernel (kernels.MoverSync), a copy from each peer's symmetric
// buffer, at the offset of this rank's input in its own, into the output
// (and this rank's own part from its input), and the agreement again, so
// that no rank writes its input while a peer still reads it. The two
// agreements are two calls of the comm, and their fingerprints carry the
// input's offset, so ranks whose offsets differ fail as a mismatch. The
// copies run side by side: this rank's own part (which needs no peer)
// on lane 0 from the start, the first peer's on s after the agreement,
// every other peer's on a lane of its own. The caller holds c.mu.
func (c *Comm) moveCopy(ctx context.Context, s backend.Stream, m moveCall, timeoutNs uint64) error {
	size := m.dtype.Size()
	n := m.count * size
	off := int(m.in - c.mem.Buffer(c.rank))
	key, extra := m.key()
	key.count ^= off << 24 // a fingerprint, not a value: only its mix matters
	args := m.args(0, m.count, timeoutNs, extra|kernels.MoverSync)
	cfg := backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32), Early: true}
	ownDst, ownSrc := m.part(c.rank, c.rank, m.in, n)
	own := (m.op != OpBroadcast || m.root == c.rank) && ownDst != ownSrc
	// The peers whose parts this rank reads, the next rank first, so that
	// at three ranks and more each peer is read by one rank at a time.
	var peers []int
	for i := 1; i < c.world; i++ {
		if p := (c.rank + i) % c.world; m.op != OpBroadcast || p == m.root {
			peers = append(peers, p)
		}
	}
	if err := c.openLanes(ctx, max(len(peers), 1)); err != nil {
		return fmt.Errorf("collective: %v: %w", m.op, err)
	}
	var joins []backend.Event
	if own {
		err := s.Record(c.forks[0])
		if err == nil {
			err = c.copyOnLane(0, 0, ownDst, ownSrc, n)
		}
		if err != nil {
			return fmt.Errorf("collective: %v: copying this rank's own part: %w", m.op, err)
		}
		joins = append(joins, c.lanes[0].done)
	}
	if err := c.enqueue(ctx, s, m.op.kernel(), cfg, args, key); err != nil {
		return err
	}
	if len(peers) > 1 {
		if err := s.Record(c.forks[1]); err != nil {
			return fmt.Errorf("collective: %v: %w", m.op, err)
		}
	}
	for i, p := range peers {
		dst, src := m.part(c.rank, p, c.mem.Buffer(p).Add(off), n)
		var err error
		if i == 0 {
			err = s.CopyAsync(dst, src, n)
		} else {
			err = c.copyOnLane(i, 1, dst, src, n)
			joins = append(joins, c.lanes[i].done)
		}
		if err != nil {
			return fmt.Errorf("collective: %v: copying rank %d's part: %w", m.op, p, err)
		}
	}
	for _, ev := range joins {
		if err := s.WaitEvent(ev); err != nil {
			return fmt.Errorf("collective: %v: joining the copies: %w", m.op, err)
		}
	}
	return c.enqueue(ctx, s, m.op.kernel(), cfg, args, key)
}

// part is where rank me's output takes the n bytes of rank p's part of a
// call on the copy engines, and where they come from when p's input is at
// in (as this process maps it).
func (m moveCall) part(me, p int, in backend.DevicePtr, n int) (dst, src backend.DevicePtr) {
	switch m.op {
	case OpAllGather:
		return m.out.Add(p * n), in
	case OpAllToAll: // block me of p's input
		return m.out.Add(p * n), in.Add(me * n)
	}
	return m.out, in
}

// key is what the Call of every launch of the call fingerprints (callKey)
// and its kernels' Extra: the block stride, or the broadcast's root.
func (m moveCall) key() (callKey, uint64) {
	key, extra := callKey{count: m.count}, uint64(m.count)
	switch m.op {
	case OpReduceScatter:
		key.op = m.red
	case OpBroadcast:
		key.op, extra = backend.ReduceOp(m.root), uint64(m.root)
	}
	return key, extra
}

// args are the kernel arguments of a launch of n elements per block from
// byte off of every block (the reduction Sum where the call has none, and
// for Avg, which divideIfAvg completes).
func (m moveCall) args(off, n int, timeoutNs, extra uint64) kernels.AllReduceArgs {
	a := kernels.AllReduceArgs{Input: m.in.Add(off), Output: m.out.Add(off), Count: uint64(n), DType: m.dtype, Op: m.red.Reduced(),
		TimeoutNs: timeoutNs, Extra: extra}
	if !a.Op.Kernel() {
		a.Op = backend.Sum
	}
	return a
}

// moverPipelineLaunchConfig is the launch shape of a pipelined
// data-movement kernel of op with blocks of n bytes per rank: the
// all-reduce Pipeline's at world 2 (64 KiB of a block per grid block, up
// to 128 blocks, as many as the push area has chunk slots for), at every
// world; a relayed broadcast (kernels.BroadcastRelays) as many as it has
// slices for.
func moverPipelineLaunchConfig(op Op, n, world int) backend.LaunchConfig {
	chunk := func(grid int) int { return kernels.MoverPipelineChunk(n, world, grid) }
	if op == OpBroadcast && kernels.BroadcastRelays(world) {
		chunk = func(grid int) int { return kernels.RelayChunk(world, grid) }
	}
	blocks := pipelineBlocks(chunk)
	return backend.LaunchConfig{Grid: backend.D1(uint32(gridFor(n, pipelineBlockBytes(world), blocks))), Block: backend.D1(512), Early: true}
}

// chunkDeadline is the check a chunk loop makes before issuing the chunk
// at element off of count: the caller's context still open.
func chunkDeadline(ctx context.Context, off, count int) error {
	if err := ctx.Err(); err != nil {
		code := backend.CodeClosed
		if errors.Is(err, context.DeadlineExceeded) {
			code = backend.CodeTimeout
		}
		return backend.Wrap(code, err, fmt.Sprintf("stopped before the chunk at element %d of %d", off, count))
	}
	return nil
}

// checkRanges checks, where the device can tell (backend.RangeChecker),
// that the n bytes at in and the m bytes at out each lie inside one
// allocation.
func (c *Comm) checkRanges(in backend.DevicePtr, n int, out backend.DevicePtr, m int) error {
	rc, ok := c.dev.(backend.RangeChecker)
	if !ok {
		return nil
	}
	if in == out && n > 0 && m > 0 {
		// In place: one look-up (a driver call for memory the device
		// did not allocate) covers both.
		if err := rc.CheckRange(in, max(n, m)); err != nil {
			return fmt.Errorf("in-place buffer of %d bytes at %#x: %w", max(n, m), uint64(in), err)
		}
		return nil
	}
	if n > 0 {
		if err := rc.CheckRange(in, n); err != nil {
			return fmt.Errorf("input of %d bytes at %#x: %w", n, uint64(in), err)
		}
	}
	if m > 0 {
		if err := rc.CheckRange(out, m); err != nil {
			return fmt.Errorf("output of %d bytes at %#x: %w", m, uint64(out), err)
		}
	}
	return nil
}

// moverLaunchConfig is the launch shape of a data-movement kernel with
// blocks of n bytes per rank that reads and writes bytes in all: 512
// threads; on the LL path (kernels.MoverPath) the one-shot LL's blocks for
// n bytes, otherwise a block per 32 KiB, at most 64 blocks.
func moverLaunchConfig(n, bytes, world int) backend.LaunchConfig {
	const block = 512
	blocks := gridFor(bytes, 32<<10, 64)
	if kernels.MoverPath(n, world) == "ll" {
		blocks = gridFor(n, llPerBlock(n), kernels.KernelChannels)
	}
	return backend.LaunchConfig{Grid: backend.D1(uint32(blocks)), Block: backend.D1(block), Early: true}
}

// Source says what element i of rank me's output is made of in a call of
// o with count elements per rank (as the Comm methods take it) and root
// (broadcast): element j of rank r's input, or, for the reductions (r =
// -1), element j of every rank's input folded together.
func (o Op) Source(me, root, count, i int) (r, j int) {
	switch o {
	case OpReduceScatter:
		return -1, me*count + i
	case OpAllGather:
		return i / count, i % count
	case OpBroadcast:
		return root, i
	case OpAllToAll:
		return i / count, me*count + i%count
	}
	return -1, i
}

// Reference is the exact value of element i of rank me's output in a call
// of o over world ranks (see Source), when element j of rank r's input is
// in(r, j) and a reduction folds in ascending rank order with fold. It is
// what the bench and the suite check results against.
func (o Op) Reference(in func(r, j int) float64, fold func(a, b float64) float64, world, me, root, count, i int) float64 {
	r, j := o.Source(me, root, count, i)
	if r >= 0 {
		return in(r, j)
	}
	acc := in(0, j)
	for r := 1; r < world; r++ {
		acc = fold(acc, in(r, j))
	}
	return acc
}
