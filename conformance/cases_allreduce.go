package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/connectivity"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric"
)

// allReduceBuffer is the symmetric buffer of the all-reduce cases: large
// enough for multi-block kernels, small enough that "up to the buffer" stays
// quick on a CPU.
const (
	allReduceBuffer      = 1 << 20
	quickAllReduceBuffer = 256 << 10
)

func init() {
	for _, algo := range collective.Algos {
		for _, d := range backend.DTypes {
			register(Case{Name: fmt.Sprintf("allreduce/%v/%v", algo, d), MinWorld: 2, Run: allReduceMatrix(algo, d)})
		}
	}
	register(
		Case{Name: "allreduce/ops", MinWorld: 2, Run: caseOps},
		Case{Name: "allreduce/repeat-100", MinWorld: 2, Run: caseRepeat},
		Case{Name: "allreduce/symmetric-input", MinWorld: 2, Run: caseSymmetricInput},
		Case{Name: "allreduce/too-large", MinWorld: 2, Run: caseTooLarge},
		Case{Name: "allreduce/select", MinWorld: 2, Run: caseSelect},
		Case{Name: "collective/bad-arguments", MinWorld: 2, Run: caseBadArgs},
		Case{Name: "collective/barrier", MinWorld: 2, Run: caseCommBarrier},
	)
}

func bufferFor(e *Env) int {
	if e.Quick {
		return quickAllReduceBuffer
	}
	return allReduceBuffer
}

// sizes are the element counts each algorithm × dtype case checks: one
// element, odd counts, counts that no world × vector width divides, and
// the whole capacity.
func sizes(capacity int, quick bool) []int {
	s := []int{1, 2, 3, 7, 8, 15, 17, 31, 1000, 1023, 4099}
	if !quick {
		s = append(s, 65537, capacity-5)
	}
	s = append(s, capacity)
	out := s[:0]
	for _, n := range s {
		if n >= 1 && n <= capacity {
			out = append(out, n)
		}
	}
	return out
}

func allReduceMatrix(algo collective.Algo, d backend.DType) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		c, err := newComm(ctx, e, bufferFor(e))
		if err != nil {
			return err
		}
		defer c.Close()
		if algo == collective.HCM && c.Topology() != connectivity.HybridCubeMesh {
			_ = closeComm(ctx, c)
			return Skip("HCM needs a hybrid cube mesh; topology is %v", c.Topology())
		}
		reps := 3
		if e.Quick {
			reps = 2
		}
		seed := 1
		limit := c.Capacity(algo, d)
		if algo == collective.Pipeline {
			// No buffer limit: prove it past the buffer, at three buffers.
			limit = 3*c.Capacity(collective.OneShot, d) + 5
		}
		for _, n := range sizes(limit, e.Quick) {
			for _, outOfPlace := range []bool{false, true} {
				for range reps {
					seed++
					if err := allReduceOnce(ctx, e, c, algo, d, backend.Sum, n, seed, outOfPlace); err != nil {
						return fmt.Errorf("count %d out-of-place=%v: %w", n, outOfPlace, err)
					}
				}
			}
		}
		return closeComm(ctx, c)
	}
}

// allReduceOnce runs one checked all-reduce of count elements with
// canaries around input and output.
func allReduceOnce(ctx context.Context, e *Env, c *collective.Comm, algo collective.Algo, d backend.DType,
	op backend.ReduceOp, count, seed int, outOfPlace bool) error {
	dev := c.Device()
	in, host, err := newPatterned(ctx, e, dev, d, count, seed)
	if err != nil {
		return err
	}
	defer in.close()
	out := in
	var opts []collective.CallOption
	if outOfPlace {
		if out, err = newGuarded(ctx, e, dev, len(host)); err != nil {
			return err
		}
		defer out.close()
		opts = append(opts, collective.Output(out.ptr()))
	}
	s, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	w, err := c.AllReduce(ctx, s, in.ptr(), count, d, op, algo, opts...)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Synchronize(ctx); err != nil {
		return err
	}
	got, err := out.read(ctx)
	if err != nil {
		return err
	}
	if err := e.checkResult(d, op, got, count, seed); err != nil {
		return fmt.Errorf("%v %v %v: %w", algo, d, op, err)
	}
	if outOfPlace {
		if err := in.unchanged(ctx, host, algo); err != nil {
			return fmt.Errorf("out of place: %w", err)
		}
		if err := in.checkCanaries(ctx); err != nil {
			return fmt.Errorf("input: %w", err)
		}
	}
	if err := out.checkCanaries(ctx); err != nil {
		return fmt.Errorf("%v %v: output: %w", algo, d, err)
	}
	return nil
}

func algosFor(c *collective.Comm) []collective.Algo {
	if c.Topology() == connectivity.HybridCubeMesh {
		return collective.Algos
	}
	return []collective.Algo{collective.OneShot, collective.TwoShot}
}

// caseOps: max and min on every algorithm; avg (a sum, then the division
// kernel, or the vendor library's own) on every path, the Pipeline and
// the fallback included.
func caseOps(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		avgAlgos := append(slices.Clone(algosFor(c)), collective.Pipeline)
		if numeric.VendorAvgExact(e.World) {
			avgAlgos = append(avgAlgos, collective.None)
		}
		for _, op := range []backend.ReduceOp{backend.Max, backend.Min, backend.Avg} {
			algos := algosFor(c)
			if op == backend.Avg {
				algos = avgAlgos
			}
			for _, algo := range algos {
				for _, d := range []backend.DType{backend.Float32, backend.BFloat16, backend.Int32} {
					if err := allReduceOnce(ctx, e, c, algo, d, op, 1001, int(op)*7, true); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

// caseRepeat runs 100 back-to-back all-reduces per algorithm on one
// stream without resetting anything: flags must only grow.
func caseRepeat(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		const count = 777
		d := backend.BFloat16
		dev := c.Device()
		s, err := dev.NewStream(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		bufs := make([]*guarded, 100)
		for i := range bufs {
			if bufs[i], err = newGuarded(ctx, e, dev, count*d.Size()); err != nil {
				return err
			}
			defer bufs[i].close()
		}
		for _, algo := range algosFor(c) {
			host := make([]byte, count*d.Size())
			for i, g := range bufs {
				numeric.Pattern(d, host, count, e.Rank, 1000+i)
				if err := g.write(ctx, host); err != nil {
					return err
				}
			}
			// Enqueue all 100, then wait once: the kernels chain on the
			// stream with no host round trip between them.
			var last *collective.Work
			for _, g := range bufs {
				if last, err = c.AllReduce(ctx, s, g.ptr(), count, d, backend.Sum, algo); err != nil {
					return err
				}
			}
			if err := last.Synchronize(ctx); err != nil {
				return err
			}
			for i, g := range bufs {
				got, err := g.read(ctx)
				if err != nil {
					return err
				}
				if err := e.checkResult(d, backend.Sum, got, count, 1000+i); err != nil {
					return fmt.Errorf("%v call %d: %w", algo, i, err)
				}
			}
		}
		return nil
	})
}

// patternInBuffer writes this rank's pattern of count elements (seed) at
// the start of its symmetric buffer and returns the view of them.
func patternInBuffer(ctx context.Context, e *Env, c *collective.Comm, d backend.DType, count, seed int) (symmetric.View, error) {
	v, err := c.GetBuffer(e.Rank, count, d, 0)
	if err != nil {
		return v, err
	}
	host := make([]byte, count*d.Size())
	numeric.Pattern(d, host, count, e.Rank, seed)
	return v, c.Device().CopyToDevice(ctx, v.Ptr, host)
}

// caseSymmetricInput reduces data that already sits in the comm's own
// symmetric buffer (no copy-in).
func caseSymmetricInput(ctx context.Context, e *Env) error {
	return withComm(ctx, e, bufferFor(e), func(c *collective.Comm) error {
		d := backend.Float32
		for _, algo := range []collective.Algo{collective.OneShot, collective.TwoShot} {
			count := 4099
			v, err := patternInBuffer(ctx, e, c, d, count, 5)
			if err != nil {
				return err
			}
			dev := c.Device()
			out, err := newGuarded(ctx, e, dev, count*d.Size())
			if err != nil {
				return err
			}
			defer out.close()
			s, err := dev.NewStream(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := c.AllReduce(ctx, s, v.Ptr, count, d, backend.Sum, algo, collective.Output(out.ptr()))
			if err != nil {
				return err
			}
			if err := w.Synchronize(ctx); err != nil {
				return err
			}
			got, err := out.read(ctx)
			if err != nil {
				return err
			}
			if err := e.checkResult(d, backend.Sum, got, count, 5); err != nil {
				return fmt.Errorf("%v from the symmetric buffer: %w", algo, err)
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		// In place in the symmetric buffer: two-shot may, one-shot may not
		// (peers still read the buffer while it would write).
		count := 1001
		v, err := patternInBuffer(ctx, e, c, d, count, 6)
		if err != nil {
			return err
		}
		dev := c.Device()
		s, err := dev.NewStream(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := c.AllReduce(ctx, s, v.Ptr, count, d, backend.Sum, collective.OneShot); !errors.Is(err, backend.ErrInvalidArgument) {
			return fmt.Errorf("one-shot in place in the symmetric buffer: got %v, want ErrInvalidArgument", err)
		}
		w, err := c.AllReduce(ctx, s, v.Ptr, count, d, backend.Sum, collective.TwoShot)
		if err != nil {
			return err
		}
		if err := w.Synchronize(ctx); err != nil {
			return err
		}
		got := make([]byte, count*d.Size())
		if err := dev.CopyFromDevice(ctx, got, v.Ptr); err != nil {
			return err
		}
		if err := e.checkResult(d, backend.Sum, got, count, 6); err != nil {
			return fmt.Errorf("two-shot in place in the symmetric buffer: %w", err)
		}
		return nil
	})
}

func caseTooLarge(ctx context.Context, e *Env) error {
	return withComm(ctx, e, quickAllReduceBuffer, func(c *collective.Comm) error {
		d := backend.Float32
		capacity := c.Capacity(collective.OneShot, d)
		if got := c.SelectAllReduceAlgo(capacity+1, d); got != collective.None && c.Capacity(got, d) <= capacity {
			return fmt.Errorf("SelectAllReduceAlgo(%d > capacity %d) = %v, want none or an algorithm without the buffer's limit", capacity+1, capacity, got)
		}
		dev := c.Device()
		g, err := newGuarded(ctx, e, dev, (capacity+1)*d.Size())
		if err != nil {
			return err
		}
		defer g.close()
		s, err := dev.NewStream(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		for _, algo := range algosFor(c) {
			_, err := c.AllReduce(ctx, s, g.ptr(), c.Capacity(algo, d)+1, d, backend.Sum, algo)
			if !errors.Is(err, collective.ErrTooLarge) {
				return fmt.Errorf("%v with %d elements: got %v, want ErrTooLarge", algo, c.Capacity(algo, d)+1, err)
			}
		}
		// None takes the fallback path, which must handle any size.
		count := 2*capacity + 3
		if err := allReduceOnce(ctx, e, c, collective.None, d, backend.Sum, count, 9, true); err != nil {
			return fmt.Errorf("fallback: %w", err)
		}
		return nil
	})
}

func caseSelect(ctx context.Context, e *Env) (err error) {
	opts, err := commOptions(ctx, e, bufferFor(e))
	if err != nil {
		return err
	}
	c, err := collective.New(e.Store, e.Rank, e.World, opts)
	if err != nil {
		return err
	}
	defer closeInto(&err, c)
	if got := c.SelectAllReduceAlgo(1, backend.BFloat16); got != collective.None {
		return fmt.Errorf("before rendezvous: selected %v, want none", got)
	}
	if err := c.Rendezvous(ctx); err != nil {
		if errors.Is(err, collective.ErrTopology) {
			return Skip("topology not usable: %v", err)
		}
		return err
	}
	for _, d := range backend.DTypes {
		for _, n := range []int{1, 1000, c.Capacity(collective.OneShot, d) / 2} {
			got := c.SelectAllReduceAlgo(n, d)
			if got == collective.None {
				return fmt.Errorf("SelectAllReduceAlgo(%d, %v) = none on a %v group", n, d, c.Topology())
			}
			if got == collective.HCM && c.Topology() != connectivity.HybridCubeMesh {
				return fmt.Errorf("selected HCM on a %v group", c.Topology())
			}
			if n > c.Capacity(got, d) {
				continue
			}
		}
	}
	if got := c.SelectAllReduceAlgo(0, backend.Float32); got != collective.None {
		return fmt.Errorf("SelectAllReduceAlgo(0) = %v, want none", got)
	}
	before := collective.UsageCounter()
	if err := allReduceOnce(ctx, e, c, c.SelectAllReduceAlgo(100, backend.Float32), backend.Float32, backend.Sum, 100, 3, false); err != nil {
		return err
	}
	if collective.UsageCounter() <= before {
		return fmt.Errorf("usage counter did not grow: %d -> %d", before, collective.UsageCounter())
	}
	return c.Barrier(ctx)
}

// badCall is a call the comm must refuse with ErrInvalidArgument.
type badCall struct {
	name string
	call func() (*collective.Work, error)
}

func caseBadArgs(ctx context.Context, e *Env) error {
	return withComm(ctx, e, quickAllReduceBuffer, func(c *collective.Comm) error {
		dev := c.Device()
		s, err := dev.NewStream(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		g, err := newGuarded(ctx, e, dev, 64*kernels.MaxRanks)
		if err != nil {
			return err
		}
		defer g.close()
		p := g.ptr()
		allReduce := func(count int, d backend.DType, op backend.ReduceOp, algo collective.Algo) func() (*collective.Work, error) {
			return func() (*collective.Work, error) { return c.AllReduce(ctx, s, p, count, d, op, algo) }
		}
		f32 := backend.Float32
		bad := []badCall{
			{"zero count", allReduce(0, f32, backend.Sum, collective.OneShot)},
			{"negative count", allReduce(-1, f32, backend.Sum, collective.OneShot)},
			{"bad dtype", allReduce(4, backend.DType(99), backend.Sum, collective.OneShot)},
			{"bad op", allReduce(4, f32, backend.ReduceOp(9), collective.OneShot)},
			{"bad algo", allReduce(4, f32, backend.Sum, collective.Algo(42))},
			{"all-reduce with Direct", allReduce(4, f32, backend.Sum, collective.Direct)},
		}
		moverCalls, err := moverBadCalls(ctx, e, c, s, p)
		if err != nil {
			return err
		}
		bad = append(bad, moverCalls...)
		if _, ok := dev.(backend.RangeChecker); ok {
			// The device knows its allocations: a count far past this one is
			// refused before anything is launched (on the selected path, and
			// on the data-movement collectives' output).
			far := 1 << 20
			bad = append(bad, badCall{"all-reduce count past the allocation", allReduce(far, f32, backend.Sum, collective.None)},
				badCall{"all-gather output past the allocation", func() (*collective.Work, error) {
					return c.AllGather(ctx, s, p, p, g.n/4, f32, collective.None)
				}})
		}
		for _, b := range bad {
			if _, err := b.call(); !errors.Is(err, backend.ErrInvalidArgument) {
				return fmt.Errorf("%s: got %v, want ErrInvalidArgument", b.name, err)
			}
		}
		// The comm still serves calls.
		m := moverCall{op: collective.OpAllGather, algo: collective.Direct, dtype: f32, count: 5, seed: 3, outPlace: true}
		if err := moverOnce(ctx, e, c, m); err != nil {
			return fmt.Errorf("after the refused calls: %w", err)
		}
		if c.Topology() != connectivity.HybridCubeMesh {
			if _, err := c.AllReduce(ctx, s, g.ptr(), 4, backend.Float32, backend.Sum, collective.HCM); !errors.Is(err, backend.ErrInvalidArgument) {
				return fmt.Errorf("HCM on %v: got %v, want ErrInvalidArgument", c.Topology(), err)
			}
		}
		if _, err := c.GetBuffer(e.World, 1, backend.Float32, 0); err == nil {
			return fmt.Errorf("GetBuffer of rank %d: want an error", e.World)
		}
		if _, err := c.GetBuffer(0, c.BufferSize()/4+1, backend.Float32, 0); err == nil {
			return fmt.Errorf("GetBuffer past the end: want an error")
		}
		return nil
	})
}

func caseCommBarrier(ctx context.Context, e *Env) error {
	return withComm(ctx, e, quickAllReduceBuffer, func(c *collective.Comm) error {
		for range 10 {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		if e.Rank < 2 {
			for range 5 {
				if err := c.Barrier(ctx, 0, 1); err != nil {
					return fmt.Errorf("subset barrier: %w", err)
				}
			}
		}
		return nil
	})
}
