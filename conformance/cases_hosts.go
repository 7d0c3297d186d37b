package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/closing"
	"github.com/intranode/intranode/internal/numeric"
)

// The collectives across hosts (collective.HostGroups), on simulated hosts:
// with Config.Hosts = H, rank r tells host "sim-host-<r*H/world>", so the
// ranks are placed host by host. On the fake the inter-host step is
// collective.LoopbackInterHost; on CUDA it is NCCL (which needs
// NCCL_HOSTID per process to treat the simulated hosts as hosts).
func init() {
	for _, op := range []collective.Op{collective.OpAllReduce, collective.OpReduceScatter, collective.OpAllGather} {
		register(Case{Name: fmt.Sprintf("hosts/%v", op), MinWorld: 2, Hosts: true, Run: hostsCase(op)})
	}
	register(Case{Name: "faults/kill-hosts", MinWorld: 2, Hosts: true, Run: caseKillHosts,
		Fault: &Fault{Summary: "killed rank during an all-reduce, reduce-scatter or all-gather across simulated hosts",
			Role: VictimDies, Processes: true}})
	register(Case{Name: "faults/mismatch-hosts", MinWorld: 2, Hosts: true, Run: caseMismatchHosts,
		Fault: &Fault{Summary: "the last simulated host makes another call than the others (count, dtype, op or collective)",
			Role: VictimNone, Expect: "ended in ErrMismatch across hosts on every rank, naming ranks of the other side, within deadline+" +
				FaultGrace.String()}})
}

// SimulatedHost is the host name of rank r of world ranks split into
// hosts simulated hosts, placed host by host.
func SimulatedHost(r, world, hosts int) string {
	return fmt.Sprintf("sim-host-%d", r*hosts/world)
}

// simulatedDevice is rank r's device when simulated hosts share one
// machine: device r, every rank its own (a host's default, its index among
// the host's ranks, would put every simulated host on devices 0..L-1).
func simulatedDevice(e *Env) *int {
	d := e.Rank
	return &d
}

// joinSimulated joins this rank to the job's simulated hosts, each rank
// on its own device, and requires every rank to have joined its host's
// group and the job to span e.Hosts groups. With one rank per host there
// is no group to join: JoinHosts excludes each rank as the only one on its
// host (collective.ErrWorldSize), every collective is then the inter-host
// engine's, as on hosts of one GPU, and any other exclusion still fails.
func joinSimulated(ctx context.Context, e *Env, buffer int, timeout time.Duration) (*collective.HostGroups, error) {
	h, err := collective.JoinHosts(ctx, e.Store, e.Rank, e.World, collective.Options{Backend: e.Backend,
		Hostname: SimulatedHost(e.Rank, e.World, e.Hosts), Device: simulatedDevice(e), BufferSize: buffer, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	alone := e.World == e.Hosts
	unexpected := slices.DeleteFunc(slices.Clone(h.Excluded), func(x *collective.RankError) bool {
		return alone && errors.Is(x, collective.ErrWorldSize)
	})
	switch {
	case len(unexpected) > 0:
		err = fmt.Errorf("not every rank joined its host's group: %v", unexpected)
	case len(h.Groups) != e.Hosts:
		err = fmt.Errorf("the ranks formed %d host groups, want %d (simulated hosts: %d)", len(h.Groups), e.Hosts, e.Hosts)
	}
	if err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return h, nil
}

func hostsCase(op collective.Op) func(ctx context.Context, e *Env) error {
	return func(ctx context.Context, e *Env) (err error) {
		h, err := joinSimulated(ctx, e, quickAllReduceBuffer, e.Timeout/2)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, h.Close()) }()
		dev, err := h.Device(ctx)
		if err != nil {
			return err
		}
		dtypes := []backend.DType{backend.Float32, backend.BFloat16, backend.Int32, backend.Float16, backend.Float64}
		counts := []int{1, 7, 1000, 4099}
		if e.Quick {
			dtypes, counts = dtypes[:2], counts[:3]
		}
		for _, d := range dtypes {
			for i, count := range counts {
				inPlace := op != collective.OpReduceScatter && i%2 == 1
				if err := CheckHostCollective(ctx, h, dev, op, d, count, 10*i+int(d), inPlace); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// CheckHostCollective runs one HostGroups collective of op (all-reduce,
// reduce-scatter or all-gather; sum) on rank h with count elements per
// rank of integer-valued pattern data in dtype d, buffers and stream on
// dev, in place where inPlace, and checks every element of the output
// exactly.
func CheckHostCollective(ctx context.Context, h *collective.HostGroups, dev backend.Device, op collective.Op,
	d backend.DType, count, seed int, inPlace bool) (err error) {
	inN, outN := op.Elements(count, h.World)
	b, err := newHostBuffers(ctx, dev, max(inN, outN)*d.Size())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	return b.check(ctx, h, op, d, count, seed, inPlace)
}

// hostBuffers are the device buffers and stream of HostGroups collectives
// checked one after another. A fault case makes them before its timed
// calls, so that a call's time is the collective's, not the frees' (which
// wait for every kernel still running on the device).
type hostBuffers struct {
	dev     backend.Device
	in, out backend.Allocation
	s       backend.Stream
}

// newHostBuffers allocates two buffers of n bytes and a stream on dev.
func newHostBuffers(ctx context.Context, dev backend.Device, n int) (_ *hostBuffers, err error) {
	b := &hostBuffers{dev: dev}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
		}
	}()
	if b.in, err = dev.Alloc(ctx, n); err != nil {
		return nil, err
	}
	if b.out, err = dev.Alloc(ctx, n); err != nil {
		return nil, err
	}
	if b.s, err = dev.NewStream(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Close releases the stream and buffers.
func (b *hostBuffers) Close() error {
	errs := closing.Field(nil, &b.s)
	errs = closing.Field(errs, &b.in)
	errs = closing.Field(errs, &b.out)
	return errors.Join(errs...)
}

// check is CheckHostCollective on b's buffers and stream.
func (b *hostBuffers) check(ctx context.Context, h *collective.HostGroups, op collective.Op,
	d backend.DType, count, seed int, inPlace bool) error {
	inN, outN := op.Elements(count, h.World)
	size := d.Size()
	if n := max(inN, outN) * size; n > b.in.Size() {
		return fmt.Errorf("%v of %d %v needs %d bytes, the buffers hold %d", op, count, d, n, b.in.Size())
	}
	in, out := b.in, b.out
	if inPlace {
		out = in
	}
	value := func(r, j int) float64 { return numeric.PatternValue(r, seed, j) }
	host := make([]byte, max(inN, outN)*size)
	inPtr, base := in.Ptr(), 0
	if inPlace && op == collective.OpAllGather {
		// In place: the input is this rank's block of the output.
		inPtr, base = in.Ptr().Add(h.Rank*count*size), h.Rank*count
	}
	numeric.Pattern(d, host[base*size:], inN, h.Rank, seed)
	if err := b.dev.CopyToDevice(ctx, in.Ptr(), host); err != nil {
		return err
	}
	var w *collective.HostWork
	var err error
	switch op {
	case collective.OpAllReduce:
		w, err = h.AllReduce(ctx, b.s, inPtr, out.Ptr(), count, d, backend.Sum)
	case collective.OpReduceScatter:
		w, err = h.ReduceScatter(ctx, b.s, inPtr, out.Ptr(), count, d, backend.Sum)
	case collective.OpAllGather:
		w, err = h.AllGather(ctx, b.s, inPtr, out.Ptr(), count, d)
	default:
		return fmt.Errorf("%v is not a collective across hosts", op)
	}
	if err != nil {
		return err
	}
	if err := w.Synchronize(ctx); err != nil {
		return err
	}
	got := make([]byte, outN*size)
	if err := b.dev.CopyFromDevice(ctx, got, out.Ptr()); err != nil {
		return err
	}
	sum := func(a, b float64) float64 { return a + b }
	for i := range outN {
		want := op.Reference(value, sum, h.World, h.Rank, 0, count, i)
		if g := numeric.Get(d, got, i); g != want {
			return fmt.Errorf("rank %d %v %v count %d in place %v: element %d is %v, want %v", h.Rank, op, d, count, inPlace, i, g, want)
		}
	}
	return nil
}

// faultHostBytes is the buffer size of the fault cases across hosts:
// their counts are at most faultHostCount elements per rank, of at most 8
// bytes.
func faultHostBytes(world int) int { return world * faultHostCount * 8 }

const faultHostCount = 4160

// hostsFault is a fault case's rank across simulated hosts: its groups,
// and buffers made before any timed call.
type hostsFault struct {
	h   *collective.HostGroups
	dev backend.Device
	b   *hostBuffers
}

// joinForFault is joinSimulated for a fault case, within the setup
// deadline, its waits bounded by the fault deadline; then the buffers.
func joinForFault(ctx context.Context, e *Env) (f *hostsFault, err error) {
	f = &hostsFault{}
	a := try(ctx, "joining the hosts", setupDeadline(e), func(ctx context.Context) (err error) {
		if f.h, err = joinSimulated(ctx, e, faultBuffer, e.FaultDeadline); err != nil {
			return err
		}
		if f.dev, err = f.h.Device(ctx); err == nil {
			f.b, err = newHostBuffers(ctx, f.dev, faultHostBytes(e.World))
		}
		if err != nil {
			err = errors.Join(err, f.h.Close())
		}
		return err
	})
	if a.err != nil {
		return nil, fmt.Errorf("rank %d: %w", e.Rank, a.err)
	}
	return f, nil
}

// Close releases the buffers, then the groups.
func (f *hostsFault) Close() error { return errors.Join(f.b.Close(), f.h.Close()) }

// call is one checked collective on f's buffers.
func (f *hostsFault) call(op collective.Op, d backend.DType, count, seed int) func(context.Context) error {
	return func(ctx context.Context) error { return f.b.check(ctx, f.h, op, d, count, seed, false) }
}

// caseKillHosts: across simulated hosts, after a few good calls the victim
// starts one more all-reduce, reduce-scatter or all-gather and dies
// during it. Every other rank of the job — on its host, and through the
// inter-host step on the others — must fail within the deadline.
func caseKillHosts(ctx context.Context, e *Env) error {
	p := e.Plan()
	op := []collective.Op{collective.OpAllReduce, collective.OpReduceScatter, collective.OpAllGather}[p.Rand.IntN(3)]
	count := 1 + p.Rand.IntN(4096)
	good := p.Rand.IntN(3)
	delay := time.Duration(p.Rand.Int64N(int64(2 * time.Millisecond)))
	f, err := joinForFault(ctx, e)
	if err != nil {
		return err
	}
	call := func(seed int) func(context.Context) error { return f.call(op, backend.Float32, count, seed) }
	if e.Rank != p.Victim {
		return survive(ctx, e, f, -1, func(i int) (string, func(context.Context) error) {
			return fmt.Sprintf("call %d: %v of %d", i+1, op, count), call(i + 1)
		})
	}
	for i := range good {
		if a := try(ctx, op.String(), setupDeadline(e), call(i+1)); a.err != nil {
			return fmt.Errorf("the victim's %v %d failed before it died: %w", op, i+1, a.err)
		}
	}
	go func() { _ = call(good + 1)(ctx) }()
	time.Sleep(delay)
	return die(e)
}

// caseMismatchHosts: after a few calls that agree, the ranks of the last
// simulated host make another call than the rest — every rank of a host
// agrees with its host, so only the call check across hosts can see it.
// Every rank must fail with collective.ErrMismatch from that check within
// the deadline, naming only ranks of the other side, and the job's next
// call must be refused with collective.ErrCommFailed. The plan picks the
// collective, the count, what differs, and whether every size goes
// hierarchical or flat (the same on every rank, so that both sides take one
// path), after one or two calls that agree.
func caseMismatchHosts(ctx context.Context, e *Env) (err error) {
	p := e.Plan()
	ops := []collective.Op{collective.OpAllReduce, collective.OpReduceScatter, collective.OpAllGather}
	op := ops[p.Rand.IntN(len(ops))]
	count := 1 + p.Rand.IntN(4096)
	good := 1 + p.Rand.IntN(2) // forms the engines, outside the timed call
	flat := p.Rand.IntN(2) == 0
	lastHost := SimulatedHost(e.World-1, e.World, e.Hosts)
	other := func(r int) bool { return SimulatedHost(r, e.World, e.Hosts) == lastHost }
	mine, d := op, backend.Float32
	what := []string{"count", "dtype", "collective"}[p.Rand.IntN(3)]
	last := count
	if other(e.Rank) {
		switch what {
		case "count":
			last = count + 1 + p.Rand.IntN(64)
		case "dtype":
			d = backend.Int32
		default:
			mine = ops[(slices.Index(ops, op)+1)%len(ops)]
		}
	}
	f, err := joinForFault(ctx, e)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	h := f.h
	h.Flat = nil
	if flat {
		h.Flat = map[collective.Op][]collective.Window{}
		for _, o := range ops {
			h.Flat[o] = []collective.Window{{}}
		}
	}
	for i := range good {
		if a := try(ctx, op.String(), setupDeadline(e), f.call(op, backend.Float32, count, i+1)); a.err != nil {
			return fmt.Errorf("agreeing call %d (%v of %d): %w", i+1, op, count, a.err)
		}
	}
	desc := fmt.Sprintf("%v of %d %v (the last host's calls differ in %s; flat %v)", mine, last, d, what, flat)
	a := try(ctx, desc, e.FaultDeadline, f.call(mine, d, last, 99))
	a.report(e, 0)
	switch {
	case a.err == nil:
		return fmt.Errorf("%s succeeded", desc)
	case !errors.Is(a.err, collective.ErrMismatch) || !strings.Contains(a.err.Error(), "across hosts"):
		return fmt.Errorf("%s: want collective.ErrMismatch across hosts, got: %w", desc, a.err)
	case a.elapsed > a.deadline+FaultGrace:
		return fmt.Errorf("%s took %v to fail, more than its deadline %v + %v", desc, a.elapsed, a.deadline, FaultGrace)
	}
	named, err := namedRanks(a.err)
	if err != nil {
		return err
	}
	for _, r := range named {
		if other(r) == other(e.Rank) {
			return fmt.Errorf("%s: rank %d named rank %d, of its own side, as differing: %v", desc, e.Rank, r, a.err)
		}
	}
	if len(named) == 0 {
		return fmt.Errorf("%s: the mismatch names no rank: %v", desc, a.err)
	}
	if _, err := h.AllReduce(ctx, f.b.s, 0, 0, 1, backend.Float32, backend.Sum); !errors.Is(err, collective.ErrCommFailed) {
		return fmt.Errorf("a call after the mismatch: want collective.ErrCommFailed, got %v", err)
	}
	return nil
}
