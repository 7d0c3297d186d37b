package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/kernels"
)

// The data-movement collectives: reduce-scatter, all-gather, broadcast and
// all-to-all, each in every dtype at one element per rank, odd counts, the
// buffer's capacity and past it (chunked), in and out of place, through
// the kernels (Direct), their pipelined path and None; reduce ops;
// repeated calls enqueued back to back; broadcast from every root; bad
// arguments.
func init() {
	// One case per collective runs every dtype on one comm: a case per
	// dtype would form a group (and, in processes, start the ranks) five
	// times over.
	for _, op := range movers {
		register(Case{Name: fmt.Sprintf("%v/every-dtype", op), MinWorld: 2, Run: moverMatrix(op)})
	}
	register(
		Case{Name: "reduce_scatter/ops", MinWorld: 2, Run: caseReduceScatterOps},
		Case{Name: "broadcast/every-root", MinWorld: 2, Run: caseBroadcastRoots},
		Case{Name: "movers/push-path", MinWorld: 2, Run: moversPast(kernels.OneShotLLMax)},
		Case{Name: "movers/classic-path", MinWorld: 2, Run: moversPast(kernels.OneShotPushMax)},
		Case{Name: "movers/repeat-100", MinWorld: 2, Run: caseMoversRepeat},
		Case{Name: "movers/copy-engines", MinWorld: 2, Run: caseMoversCopy},
		Case{Name: "movers/copy-offsets-differ", MinWorld: 2, Run: caseMoversCopyMismatch},
	)
}

// movers are the data-movement collectives.
var movers = []collective.Op{collective.OpReduceScatter, collective.OpAllGather, collective.OpBroadcast, collective.OpAllToAll}

// moverCall is one checked data-movement call.
type moverCall struct {
	op       collective.Op
	algo     collective.Algo
	dtype    backend.DType
	red      backend.ReduceOp
	count    int // per rank, as the Comm methods take it
	root     int
	seed     int
	outPlace bool
	// kernelDeadline, when set, bounds the call on the device alone: the
	// call's context carries no deadline (the kernel takes the comm's
	// timeout) and the host waits FaultGrace/2 longer, so that the
	// kernel's account of who did not arrive is what the error says.
	kernelDeadline time.Duration
	// untouched: the call must fail, leaving the output as it was.
	untouched bool
	// symOff places the input of a call on the copy engines
	// (collective.Copy) in the rank's symmetric buffer: its canaries
	// start symOff bytes in, the input canarySize bytes after them.
	symOff int
}

func (m moverCall) String() string {
	s := fmt.Sprintf("%v %v %d×%v", m.op, m.algo, m.count, m.dtype)
	switch m.op {
	case collective.OpReduceScatter:
		s += " " + m.red.String()
	case collective.OpBroadcast:
		s += fmt.Sprintf(" root %d", m.root)
	}
	if m.outPlace {
		return s + " out of place"
	}
	return s + " in place"
}

// want is rank me's exact output over world ranks, element by element,
// when every rank's input is numeric.Pattern of the call's seed.
func (m moverCall) want(me, world int) moverWant { return moverWant{m: m, me: me, world: world} }

// moverWant is a numeric.Valuer of a rank's exact output (moverCall.want).
// It runs once per element of every checked call, so its method is built
// without race instrumentation, and it calls no closure (Op.Reference's
// would be instrumented): with the race detector, the suite's largest
// calls spent seconds computing what they expect.
type moverWant struct {
	m         moverCall
	me, world int
}

// Value is element i of the output: collective.Op.Source's elements of
// the ranks' patterns, folded by the call's reduction in rank order.
//
//go:norace
func (w moverWant) Value(i int) float64 {
	r, j := w.m.op.Source(w.me, w.m.root, w.m.count, i)
	if r >= 0 {
		return numeric.PatternValue(r, w.m.seed, j)
	}
	return numeric.ExpectedValue(w.m.dtype, w.m.red, w.world, w.m.seed, j)
}

// layout returns the elements of the allocations a call needs and where
// its input and output lie in them (element offsets): in place, one
// allocation holds both as NCCL lays them out (the input is the output's
// block Rank for all-gather, the output the input's block Rank for
// reduce-scatter, the same elements otherwise).
func (m moverCall) layout(rank, world int) (inN, outN, inOff, outOff int) {
	inN, outN = m.op.Elements(m.count, world)
	if m.outPlace {
		return inN, outN, 0, 0
	}
	switch m.op {
	case collective.OpReduceScatter:
		return inN, 0, 0, rank * m.count
	case collective.OpAllGather:
		return outN, 0, rank * m.count, 0
	}
	return inN, 0, 0, 0
}

// moverOnce runs one checked data-movement call with canaries around its
// input and output: exact results, the input untouched out of place.
func moverOnce(ctx context.Context, e *Env, c *collective.Comm, m moverCall) error {
	dev := c.Device()
	size := m.dtype.Size()
	inN, outN, inOff, outOff := m.layout(e.Rank, e.World)
	var in *guarded
	var err error
	if m.algo == collective.Copy {
		in, err = newGuardedAt(ctx, e, dev, c.Memory().Buffer(e.Rank).Add(m.symOff), inN*size)
	} else {
		in, err = newGuarded(ctx, e, dev, inN*size)
	}
	if err != nil {
		return err
	}
	defer in.close()
	out := in
	if outN > 0 {
		if out, err = newGuarded(ctx, e, dev, outN*size); err != nil {
			return err
		}
		defer out.close()
	}
	host := in.host(inN * size)
	inElems, _ := m.op.Elements(m.count, e.World)
	numeric.Pattern(m.dtype, host[inOff*size:], inElems, e.Rank, m.seed)
	if err := in.write(ctx, host); err != nil {
		return err
	}
	s, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	ip, op := in.ptr().Add(inOff*size), out.ptr().Add(outOff*size)
	var w *collective.Work
	callCtx, syncCtx := ctx, ctx
	if m.kernelDeadline > 0 {
		callCtx = context.WithoutCancel(ctx)
		var cancel context.CancelFunc
		syncCtx, cancel = context.WithTimeout(callCtx, m.kernelDeadline+FaultGrace/2)
		defer cancel()
	}
	var before []byte // the output before the call, for a call that must fail
	if m.untouched {
		if before, err = out.read(ctx); err != nil {
			return err
		}
	}
	ctx = callCtx
	switch m.op {
	case collective.OpReduceScatter:
		w, err = c.ReduceScatter(ctx, s, ip, op, m.count, m.dtype, m.red, m.algo)
	case collective.OpAllGather:
		w, err = c.AllGather(ctx, s, ip, op, m.count, m.dtype, m.algo)
	case collective.OpBroadcast:
		var opts []collective.CallOption
		if m.outPlace {
			opts = append(opts, collective.Output(op))
		}
		w, err = c.Broadcast(ctx, s, ip, m.count, m.dtype, m.root, m.algo, opts...)
	case collective.OpAllToAll:
		w, err = c.AllToAll(ctx, s, ip, op, m.count, m.dtype, m.algo)
	}
	if err != nil {
		return fmt.Errorf("%v: %w", m, err)
	}
	defer w.Close()
	if err := w.Synchronize(syncCtx); err != nil {
		if m.untouched {
			if got, rerr := out.read(syncCtx); rerr != nil || string(got) != string(before) {
				return errors.Join(fmt.Errorf("%v failed (%w) but changed its output", m, err), rerr)
			}
		}
		return fmt.Errorf("%v: %w", m, err)
	}
	got, err := out.read(ctx)
	if err != nil {
		return err
	}
	_, outElems := m.op.Elements(m.count, e.World)
	wantIn := func(want []byte) []byte {
		// In place, what is not output must still be the input.
		if !m.outPlace {
			copy(want, host)
		}
		numeric.EncodeValues(m.dtype, want[outOff*size:], outElems, m.want(e.Rank, e.World))
		return want
	}
	var want []byte
	switch m.op {
	case collective.OpAllGather, collective.OpBroadcast:
		// The whole output is the same on every rank.
		want = e.expected.get(expectKey{coll: m.op, d: m.dtype, count: m.count, world: e.World, seed: m.seed, root: m.root},
			func() []byte { return wantIn(make([]byte, len(got))) })
	default:
		want = wantIn(out.host(len(got)))
	}
	if wrong, first := numeric.Compare(m.dtype, got, want, len(got)/size); wrong > 0 {
		return fmt.Errorf("%v: %d of %d elements wrong; first at %v", m, wrong, outElems, first)
	}
	if m.outPlace {
		if err := in.unchanged(ctx, host, m); err != nil {
			return err
		}
	}
	if err := in.checkCanaries(ctx); err != nil {
		return fmt.Errorf("%v: input: %w", m, err)
	}
	if err := out.checkCanaries(ctx); err != nil {
		return fmt.Errorf("%v: output: %w", m, err)
	}
	return nil
}

// moverCapacity is how many elements per rank one launch of op moves with
// the comm's buffer.
func moverCapacity(c *collective.Comm, op collective.Op, d backend.DType) int {
	if op == collective.OpReduceScatter || op == collective.OpAllToAll {
		return c.BufferSize() / c.World() &^ 15 / d.Size() &^ 15
	}
	return c.BufferSize() / d.Size() &^ 15
}

func moverMatrix(op collective.Op) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) (err error) {
		c, err := newComm(ctx, e, bufferFor(e))
		if err != nil {
			return err
		}
		defer closeInto(&err, c)
		for _, d := range backend.DTypes {
			if err := moverDType(ctx, e, c, op, d); err != nil {
				return err
			}
		}
		return c.Barrier(ctx)
	}
}

// moverDType checks one collective in one dtype: one element per rank, odd
// counts, the buffer's capacity and past it, in and out of place, the
// same counts through the pipelined path, and once through None.
func moverDType(ctx context.Context, e *Env, c *collective.Comm, op collective.Op, d backend.DType) error {
	capacity := moverCapacity(c, op, d)
	counts := []int{1, 2, 3, 7, 17, 1000, 4099, capacity, 2*capacity + 5}
	if e.Quick {
		// Past the buffer (chunked) in one dtype only: the chunk loop
		// does not depend on the type, and the race detector makes
		// large copies slow.
		counts = []int{1, 17, 1023}
		if d == backend.BFloat16 {
			counts[2] = capacity + 3
		}
	}
	seed := 0
	for i, n := range counts {
		for _, outPlace := range []bool{false, true} {
			// Quick: each count in one placement, alternating.
			if e.Quick && outPlace != (i%2 == 1) {
				continue
			}
			seed++
			m := moverCall{op: op, algo: collective.Direct, dtype: d, red: backend.Sum, count: n,
				root: seed % e.World, seed: seed, outPlace: outPlace}
			if err := moverOnce(ctx, e, c, m); err != nil {
				return err
			}
		}
	}
	// Pipeline: the pipelined kernel, one launch for any count (many
	// chunks per block past a grid's worth of chunk slots on GPUs).
	piped := counts
	if e.Quick {
		piped = []int{1, 1023}
	}
	for i, n := range piped {
		seed++
		m := moverCall{op: op, algo: collective.Pipeline, dtype: d, red: backend.Sum, count: n,
			root: (seed + 1) % e.World, seed: seed, outPlace: i%2 == 0}
		if err := moverOnce(ctx, e, c, m); err != nil {
			return err
		}
	}
	// None: the backend's own collective where it has one, else the
	// kernels (which the fake, with no vendor library, has already
	// shown above: a quick run skips it there).
	if !e.Quick || c.Backend().Name() != "fake" {
		m := moverCall{op: op, algo: collective.None, dtype: d, red: backend.Sum, count: 1001, root: e.World - 1,
			seed: 99, outPlace: true}
		if err := moverOnce(ctx, e, c, m); err != nil {
			return err
		}
	}
	return nil
}

// moversPast runs each data-movement collective with blocks just over
// bound(world) bytes: over kernels.OneShotLLMax the push path (the LL
// lines' bound), over kernels.OneShotPushMax the classic path, where one
// launch copies into the symmetric buffer and reads the peers' buffers
// between two barriers (kernels.MoverPath).
func moversPast(bound func(world int) int) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error { return caseMoversPast(ctx, e, bound(e.World)) }
}

func caseMoversPast(ctx context.Context, e *Env, bound int) (err error) {
	d := backend.Float32
	count := bound/d.Size() + 5
	part := int(kernels.MoverPart(uint64(count), d.Size()))
	c, err := newComm(ctx, e, e.World*part+(64<<10))
	if err != nil {
		return err
	}
	defer closeInto(&err, c)
	for i, op := range movers {
		// Quick: half the collectives at each world, the other half at
		// the next (worlds 2 and 4 cover all four); the fake's kernels move
		// half a megabyte a block here, slowly under the race detector.
		if e.Quick && (i+e.World/2)%2 != 0 {
			continue
		}
		m := moverCall{op: op, algo: collective.Direct, dtype: d, red: backend.Sum, count: count, root: i % e.World,
			seed: 70 + i, outPlace: i%2 == 0}
		if err := moverOnce(ctx, e, c, m); err != nil {
			return err
		}
	}
	return c.Barrier(ctx)
}

func caseReduceScatterOps(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		for _, red := range []backend.ReduceOp{backend.Max, backend.Min, backend.Avg} {
			algos := []collective.Algo{collective.Direct}
			if red == backend.Avg {
				algos = append(algos, collective.Pipeline)
				if numeric.VendorAvgExact(e.World) {
					algos = append(algos, collective.None)
				}
			}
			for _, algo := range algos {
				for _, d := range []backend.DType{backend.Float32, backend.BFloat16, backend.Int32} {
					m := moverCall{op: collective.OpReduceScatter, algo: algo, dtype: d, red: red, count: 1001,
						seed: int(red) * 7, outPlace: true}
					if err := moverOnce(ctx, e, c, m); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

func caseBroadcastRoots(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		for root := range e.World {
			m := moverCall{op: collective.OpBroadcast, algo: collective.Direct, dtype: backend.BFloat16, count: 333,
				root: root, seed: 40 + root}
			if err := moverOnce(ctx, e, c, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// caseMoversRepeat enqueues 25 calls of each data-movement collective back
// to back on one stream, then waits once and checks every result.
func caseMoversRepeat(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		const count, reps = 257, 25
		d := backend.BFloat16
		dev := c.Device()
		s, err := dev.NewStream(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		type pending struct {
			m       moverCall
			in, out *guarded
		}
		var calls []pending
		defer func() {
			for _, p := range calls {
				_ = p.in.close()
				_ = p.out.close()
			}
		}()
		var last *collective.Work
		for i := range reps * len(movers) {
			m := moverCall{op: movers[i%len(movers)], algo: collective.Direct, dtype: d, red: backend.Sum, count: count,
				root: i % e.World, seed: 500 + i, outPlace: true}
			inN, outN := m.op.Elements(count, e.World)
			in, err := newGuarded(ctx, e, dev, inN*d.Size())
			if err != nil {
				return err
			}
			out, err := newGuarded(ctx, e, dev, outN*d.Size())
			if err != nil {
				_ = in.close()
				return err
			}
			calls = append(calls, pending{m, in, out})
			host := in.host(inN * d.Size())
			numeric.Pattern(d, host, inN, e.Rank, m.seed)
			if err := in.write(ctx, host); err != nil {
				return err
			}
			switch m.op {
			case collective.OpReduceScatter:
				last, err = c.ReduceScatter(ctx, s, in.ptr(), out.ptr(), count, d, backend.Sum, m.algo)
			case collective.OpAllGather:
				last, err = c.AllGather(ctx, s, in.ptr(), out.ptr(), count, d, m.algo)
			case collective.OpBroadcast:
				last, err = c.Broadcast(ctx, s, in.ptr(), count, d, m.root, m.algo, collective.Output(out.ptr()))
			case collective.OpAllToAll:
				last, err = c.AllToAll(ctx, s, in.ptr(), out.ptr(), count, d, m.algo)
			}
			if err != nil {
				return fmt.Errorf("call %d, %v: %w", i, m, err)
			}
		}
		if err := last.Synchronize(ctx); err != nil {
			return err
		}
		for i, p := range calls {
			got, err := p.out.read(ctx)
			if err != nil {
				return err
			}
			want := p.out.host(len(got))
			numeric.EncodeValues(d, want, len(got)/d.Size(), p.m.want(e.Rank, e.World))
			if wrong, first := numeric.Compare(d, got, want, len(got)/d.Size()); wrong > 0 {
				return fmt.Errorf("call %d, %v: %d elements wrong; first at %v", i, p.m, wrong, first)
			}
		}
		return nil
	})
}

// moverBadCalls are data-movement calls no rank can serve: each must fail
// at once with ErrInvalidArgument, on the calling rank alone (caseBadArgs
// makes them with the all-reduce's).
func moverBadCalls(ctx context.Context, e *Env, c *collective.Comm, s backend.Stream, p backend.DevicePtr) ([]badCall, error) {
	f32 := backend.Float32
	sym, err := c.GetBuffer(e.Rank, 4, f32, 0)
	if err != nil {
		return nil, err
	}
	return []badCall{
		{"reduce-scatter zero count", func() (*collective.Work, error) {
			return c.ReduceScatter(ctx, s, p, p, 0, f32, backend.Sum, collective.Direct)
		}},
		{"reduce-scatter bad op", func() (*collective.Work, error) {
			return c.ReduceScatter(ctx, s, p, p, 4, f32, backend.ReduceOp(9), collective.Direct)
		}},
		{"all-gather bad dtype", func() (*collective.Work, error) {
			return c.AllGather(ctx, s, p, p, 4, backend.DType(99), collective.Direct)
		}},
		{"all-gather with an all-reduce algorithm", func() (*collective.Work, error) {
			return c.AllGather(ctx, s, p, p, 4, f32, collective.OneShot)
		}},
		{"broadcast root -1", func() (*collective.Work, error) {
			return c.Broadcast(ctx, s, p, 4, f32, -1, collective.Direct)
		}},
		{"broadcast root = world", func() (*collective.Work, error) {
			return c.Broadcast(ctx, s, p, 4, f32, e.World, collective.Direct)
		}},
		{"all-to-all negative count", func() (*collective.Work, error) {
			return c.AllToAll(ctx, s, p, p, -3, f32, collective.Direct)
		}},
		{"all-to-all nil stream", func() (*collective.Work, error) {
			return c.AllToAll(ctx, nil, p, p, 4, f32, collective.Direct)
		}},
		{"all-gather into the symmetric buffer", func() (*collective.Work, error) {
			return c.AllGather(ctx, s, p, sym.Ptr, 1, f32, collective.Direct)
		}},
		{"all-gather with Output", func() (*collective.Work, error) {
			return c.AllGather(ctx, s, p, p, 1, f32, collective.Direct, collective.Output(p))
		}},
		{"all-gather on the copy engines from outside the symmetric buffer", func() (*collective.Work, error) {
			return c.AllGather(ctx, s, p, p.Add(16), 1, f32, collective.Copy)
		}},
		{"all-to-all on the copy engines past the symmetric buffer's end", func() (*collective.Work, error) {
			last, err := c.GetBuffer(e.Rank, 4, f32, c.BufferSize()-16)
			if err != nil {
				return nil, err
			}
			return c.AllToAll(ctx, s, last.Ptr, p, 4, f32, collective.Copy)
		}},
		{"reduce-scatter on the copy engines", func() (*collective.Work, error) {
			return c.ReduceScatter(ctx, s, sym.Ptr, p, 1, f32, backend.Sum, collective.Copy)
		}},
	}, nil
}

// caseMoversCopy runs all-gather, broadcast (from every root) and
// all-to-all on the copy engines (collective.Copy), their input in the
// symmetric buffer at two offsets, in every dtype, from one element to as
// many as the buffer holds, back to back with the kernels' paths on the
// same comm.
func caseMoversCopy(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		seed := 900
		for _, op := range []collective.Op{collective.OpAllGather, collective.OpBroadcast, collective.OpAllToAll} {
			for i, d := range backend.DTypes {
				// The most the buffer holds at the larger offset, with
				// the input's canaries.
				in, _ := op.Elements(1, e.World)
				most := (c.BufferSize() - 40 - 2*canarySize) / d.Size() / in
				counts := []int{1, 3, 1000, most}
				if e.Quick {
					counts = []int{1 + i, 1001}
				}
				for j, n := range counts {
					seed++
					m := moverCall{op: op, algo: collective.Copy, dtype: d, count: n, root: seed % e.World, seed: seed,
						outPlace: true, symOff: 40 * (j % 2)}
					if err := moverOnce(ctx, e, c, m); err != nil {
						return err
					}
					// The kernels' path next, so that the two share
					// the comm's call sequence and channels.
					m.algo, m.seed = collective.Direct, seed+1000
					if err := moverOnce(ctx, e, c, m); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

// caseMoversCopyMismatch: ranks that put their input at different offsets
// of the symmetric buffer (rank 0 at one, the others at another) make
// different calls on the copy engines, which every rank must report as a
// mismatch (collective.ErrMismatch) within the deadline, rather than
// return what it read at its own offset of its peers' buffers.
func caseMoversCopyMismatch(ctx context.Context, e *Env) (err error) {
	c, err := newComm(ctx, e, bufferFor(e))
	if err != nil {
		return err
	}
	defer func() {
		// The comm is failed; close it without the barrier of closeInto.
		err = errors.Join(err, c.Close())
	}()
	m := moverCall{op: collective.OpAllGather, algo: collective.Copy, dtype: backend.Float32, count: 1000, seed: 5,
		outPlace: true}
	if err := moverOnce(ctx, e, c, m); err != nil {
		return fmt.Errorf("before the offsets differ: %w", err)
	}
	if e.Rank == 0 {
		m.symOff = 64
	}
	err = moverOnce(ctx, e, c, m)
	if !errors.Is(err, collective.ErrMismatch) {
		return fmt.Errorf("rank %d's offset %d against the others': got %v, want ErrMismatch", e.Rank, m.symOff, err)
	}
	return nil
}
