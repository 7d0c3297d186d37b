package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
)

// The mismatched-calls fault: after a few calls that agree, ranks make one
// call that does not — another count, dtype, op or algorithm on some ranks.
// Every rank must get collective.ErrMismatch naming exactly the ranks whose
// call differs from its own, within the deadline, with its buffer left as
// it was (no partial or wrong result), and the comm must then refuse more
// calls.
func init() {
	register(Case{Name: "faults/mismatched-calls", MinWorld: 2, Run: caseMismatchedCalls,
		Fault: &Fault{Summary: "ranks make different all-reduce calls", Role: VictimNone,
			Expect: "ended in ErrMismatch on every rank, naming exactly the ranks that differ, buffers untouched, within deadline+" +
				FaultGrace.String()}})
}

// callShape is one rank's all-reduce call in the mismatch case.
type callShape struct {
	algo  collective.Algo
	dtype backend.DType
	op    backend.ReduceOp
	count int
}

func (s callShape) String() string {
	return fmt.Sprintf("%v %d×%v %v", s.algo, s.count, s.dtype, s.op)
}

var (
	mismatchDTypes = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Float64, backend.Int32}
	mismatchOps    = []backend.ReduceOp{backend.Sum, backend.Max, backend.Min}
	mismatchAlgos  = []collective.Algo{collective.OneShot, collective.TwoShot, collective.Pipeline}
)

// mismatchPlan draws a trial's calls: the shape every rank uses for the
// agreeing calls, how many of those come first, and each rank's last call
// (at least one rank's differs from another's).
func mismatchPlan(p FaultPlan, world int) (agreed callShape, warmup int, last []callShape) {
	rng := p.Rand
	pick := func() callShape {
		d := mismatchDTypes[rng.IntN(len(mismatchDTypes))]
		// Sizes spread over every one-shot path and the two-shot: a third
		// small (LL), the rest up to the buffer.
		n := 1 + rng.IntN(faultBuffer/d.Size())
		if rng.IntN(3) == 0 {
			n = 1 + rng.IntN(2048/d.Size())
		}
		return callShape{algo: mismatchAlgos[rng.IntN(len(mismatchAlgos))], dtype: d, op: mismatchOps[rng.IntN(3)], count: n}
	}
	agreed = pick()
	warmup = rng.IntN(3)
	base := pick()
	last = make([]callShape, world)
	for r := range last {
		last[r] = base
	}
	differ := 1 + rng.IntN(world-1)
	for _, r := range rng.Perm(world)[:differ] {
		last[r] = variant(rng, base)
	}
	return agreed, warmup, last
}

// variant changes one parameter of s.
func variant(rng *rand.Rand, s callShape) callShape {
	switch rng.IntN(4) {
	case 0:
		n := s.count
		for n == s.count {
			n = 1 + rng.IntN(faultBuffer/s.dtype.Size())
		}
		s.count = n
	case 1:
		d := s.dtype
		for d == s.dtype {
			d = mismatchDTypes[rng.IntN(len(mismatchDTypes))]
		}
		s.dtype, s.count = d, min(s.count, faultBuffer/d.Size())
	case 2:
		o := s.op
		for o == s.op {
			o = mismatchOps[rng.IntN(3)]
		}
		s.op = o
	default:
		a := s.algo
		for a == s.algo {
			a = mismatchAlgos[rng.IntN(len(mismatchAlgos))]
		}
		s.algo = a
	}
	return s
}

var differRanks = regexp.MustCompile(`sees ranks \[([0-9 ]*)\] differ`)

// caseMismatchedCalls runs one trial of the mismatched-calls fault.
func caseMismatchedCalls(ctx context.Context, e *Env) (err error) {
	agreed, warmup, last := mismatchPlan(e.Plan(), e.World)
	c, sctx, cancel, err := rendezvousForFault(ctx, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer closeInto(&err, c)
	for i := range warmup {
		if err := allReduceOnce(sctx, e, c, agreed.algo, agreed.dtype, agreed.op, agreed.count, i, false); err != nil {
			return fmt.Errorf("agreeing call %d (%v): %w", i, agreed, err)
		}
	}
	mine := last[e.Rank]
	var want []int
	for r, s := range last {
		if s != mine {
			want = append(want, r)
		}
	}
	a := try(ctx, "mismatched all-reduce ("+mine.String()+")", e.FaultDeadline, func(ctx context.Context) error {
		return mismatchedCall(ctx, e, c, mine)
	})
	if a.err == nil {
		return fmt.Errorf("%s succeeded although ranks %v called %v", a.op, want, describeCalls(last))
	}
	if !errors.Is(a.err, collective.ErrMismatch) {
		return fmt.Errorf("%s: want collective.ErrMismatch (calls: %s), got: %w", a.op, describeCalls(last), a.err)
	}
	if a.elapsed > a.deadline+FaultGrace {
		return fmt.Errorf("%s took %v to fail, more than its deadline %v + %v", a.op, a.elapsed, a.deadline, FaultGrace)
	}
	got, perr := namedRanks(a.err)
	if perr != nil {
		return perr
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s named ranks %v as differing, want %v (calls: %s): %v", a.op, got, want, describeCalls(last), a.err)
	}
	if _, err := c.AllReduce(ctx, nil, 0, 1, backend.Float32, backend.Sum, collective.OneShot); !errors.Is(err, collective.ErrCommFailed) {
		return fmt.Errorf("an all-reduce after the mismatch: want collective.ErrCommFailed, got %v", err)
	}
	return nil
}

// mismatchedCall makes this rank's last call in place and checks that the
// failed call left the buffer as it was.
func mismatchedCall(ctx context.Context, e *Env, c *collective.Comm, s callShape) error {
	dev := c.Device()
	buf, host, err := newPatterned(ctx, e, dev, s.dtype, s.count, 99)
	if err != nil {
		return err
	}
	defer buf.close()
	st, err := dev.NewStream(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	w, err := c.AllReduce(ctx, st, buf.ptr(), s.count, s.dtype, s.op, s.algo)
	if err != nil {
		return err
	}
	defer w.Close()
	callErr := w.Synchronize(ctx)
	if callErr == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupDeadline(e))
	defer cancel()
	got, err := buf.read(rctx)
	if err != nil {
		return errors.Join(callErr, err)
	}
	if !bytes.Equal(got, host) {
		return fmt.Errorf("the failed call changed its buffer (%w)", callErr)
	}
	if err := buf.checkCanaries(rctx); err != nil {
		return errors.Join(callErr, err)
	}
	return callErr
}

// namedRanks extracts the ranks an ErrMismatch names.
func namedRanks(err error) ([]int, error) {
	m := differRanks.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, fmt.Errorf("the mismatch error names no ranks: %w", err)
	}
	var rs []int
	for _, f := range strings.Fields(m[1]) {
		r, cerr := strconv.Atoi(f)
		if cerr != nil {
			return nil, fmt.Errorf("the mismatch error names rank %q: %w", f, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func describeCalls(last []callShape) string {
	parts := make([]string, len(last))
	for r, s := range last {
		parts[r] = fmt.Sprintf("rank %d %v", r, s)
	}
	return strings.Join(parts, ", ")
}
