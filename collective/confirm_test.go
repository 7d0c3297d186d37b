package collective_test

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/kernels"
)

// vendorKernel is the test vendor library's all-reduce kernel.
const vendorKernel = "test_vendor_all_reduce"

// postingVendor is the fake backend with a vendor all-reduce
// (collective.FallbackAllReducer) that behaves as NCCL does when a
// communicator is aborted: every kernel of the group, running or to come,
// completes at once without moving data, as NCCL's aborted kernels still
// post their steps to their peers, so that a rank that makes the call
// later finishes it on stale buffers.
type postingVendor struct {
	*fake.Backend
	world int

	mu      sync.Mutex
	aborted bool
	calls   map[uint64]vendorCall             // by launch id
	arrived map[int]map[int]backend.DevicePtr // call number -> rank -> input
	nextID  uint64
	seq     map[int]int              // rank -> calls made
	fns     map[int]backend.Function // rank -> the vendor kernel on its device (load)
}

// load loads the vendor kernel on each rank's device (the comm's lock is
// held while it calls FallbackAllReduce).
func (v *postingVendor) load(t *testing.T, ctx context.Context, comms []*collective.Comm) {
	for r, c := range comms {
		mod, err := c.Device().LoadModule(ctx, backend.ModuleSource{Name: kernels.ModuleName})
		require.NoError(t, err)
		t.Cleanup(func() { mod.Close() })
		fn, err := mod.Function(vendorKernel)
		require.NoError(t, err)
		v.mu.Lock()
		v.fns[r] = fn
		v.mu.Unlock()
	}
}

type vendorCall struct {
	rank, seq, count int
	in, out          backend.DevicePtr
}

func newPostingVendor(t *testing.T, world int) *postingVendor {
	v := &postingVendor{world: world, calls: map[uint64]vendorCall{}, arrived: map[int]map[int]backend.DevicePtr{},
		seq: map[int]int{}, fns: map[int]backend.Function{}}
	b, err := fake.New(fake.WithDevices(world), fake.WithKernels(kernels.ModuleName, map[string]fake.Kernel{vendorKernel: v.run}))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	v.Backend = b
	return v
}

// FallbackAllReduce enqueues the vendor's float32 sum on s.
func (v *postingVendor) FallbackAllReduce(ctx context.Context, s backend.Stream, c *collective.Comm, in, out backend.DevicePtr,
	count int, dtype backend.DType, op backend.ReduceOp) error {
	if dtype != backend.Float32 || op != backend.Sum {
		return backend.Errorf(backend.CodeNotSupported, "the test vendor sums float32 only")
	}
	v.mu.Lock()
	fn := v.fns[c.Rank()]
	v.nextID++
	id := v.nextID
	v.seq[c.Rank()]++
	v.calls[id] = vendorCall{rank: c.Rank(), seq: v.seq[c.Rank()], count: count, in: in, out: out}
	v.mu.Unlock()
	return s.Launch(fn, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(1)}, backend.U64(id))
}

// ReleaseFallback aborts the vendor communicator of the group.
func (v *postingVendor) ReleaseFallback(*collective.Comm) error {
	v.mu.Lock()
	v.aborted = true
	v.mu.Unlock()
	return nil
}

// wasAborted says whether ReleaseFallback has aborted the group.
func (v *postingVendor) wasAborted() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.aborted
}

// run is the vendor kernel: it waits for every rank's call of the same
// number and writes the sum, unless the group is aborted: then it ends
// at once and writes nothing.
func (v *postingVendor) run(ctx context.Context, l *fake.Launch) error {
	v.mu.Lock()
	call := v.calls[l.Args[0].U64()]
	if v.arrived[call.seq] == nil {
		v.arrived[call.seq] = map[int]backend.DevicePtr{}
	}
	v.arrived[call.seq][call.rank] = call.in
	v.mu.Unlock()
	for {
		v.mu.Lock()
		aborted, all := v.aborted, len(v.arrived[call.seq]) == v.world
		ins := v.arrived[call.seq]
		v.mu.Unlock()
		switch {
		case aborted:
			return nil
		case all:
			out, err := l.Mem.Bytes(call.out, 4*call.count)
			if err != nil {
				return err
			}
			sum := make([]float32, call.count)
			for r := range v.world {
				b, err := l.Mem.Bytes(ins[r], 4*call.count)
				if err != nil {
					return err
				}
				for i := range sum {
					sum[i] += math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
				}
			}
			for i, x := range sum {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
			}
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
}

// TestVendorCallsAreConfirmed: a call through the vendor library is
// followed by the ranks' confirmation of it. Rank 1 makes its calls after
// rank 0 has given up on the second and aborted the vendor communicator;
// the aborted vendor completes rank 1's calls without data, as NCCL's
// aborted kernels let a late peer's call finish. Rank 1 must fail naming
// rank 0, not return that result.
func TestVendorCallsAreConfirmed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const world, count = 2, 1000
	v := newPostingVendor(t, world)
	// The comm's timeout bounds each kernel's wait, the confirmation's
	// included, below the callers' deadlines: the kernel, not the host's
	// wait, ends a call, and its status names who did not come.
	comms := pairOn(t, ctx, v, 64<<10, time.Second)
	var wg sync.WaitGroup
	v.load(t, ctx, comms)
	type rank struct {
		s       backend.Stream
		in, out backend.Allocation
	}
	ranks := make([]rank, world)
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.Device().NewStream(ctx)
			require.NoError(t, err)
			in, err := c.Device().Alloc(ctx, 4*count)
			require.NoError(t, err)
			out, err := c.Device().Alloc(ctx, 4*count)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close(); in.Close(); out.Close() })
			b := make([]byte, 4*count)
			for i := range count {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r+1)))
			}
			require.NoError(t, c.Device().CopyToDevice(ctx, in.Ptr(), b))
			ranks[r] = rank{s, in, out}
		}()
	}
	wg.Wait()
	// start makes rank r's call under cctx: a caller's deadline bounds
	// the call's kernels, else the comm's timeout does.
	start := func(cctx context.Context, r int, opts ...collective.CallOption) error {
		k := ranks[r]
		w, err := comms[r].AllReduce(cctx, k.s, k.in.Ptr(), count, backend.Float32, backend.Sum, collective.None,
			append(opts, collective.Output(k.out.Ptr()))...)
		if err != nil {
			return err
		}
		defer w.Close()
		return w.Synchronize(cctx)
	}
	call := func(r int, timeout time.Duration) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return start(cctx, r)
	}
	callWithoutDeadline := func(r int, opts ...collective.CallOption) error {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		return start(cctx, r, opts...)
	}
	sum := func(r int) float32 {
		b := make([]byte, 4*count)
		require.NoError(t, comms[r].Device().CopyFromDevice(ctx, b, ranks[r].out.Ptr()))
		return math.Float32frombits(binary.LittleEndian.Uint32(b[4*(count-1):]))
	}

	// A call every rank makes in time: confirmed, and right.
	errs := make([]error, world)
	for r := range world {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = call(r, 5*time.Second) }()
	}
	wg.Wait()
	for r := range world {
		require.NoError(t, errs[r], "rank %d", r)
		require.Equal(t, float32(3), sum(r), "rank %d", r)
	}

	// Rank 0 gives up on the second call at its deadline and aborts the
	// vendor communicator (the abort goes on beside the failed call);
	// rank 1 makes the call once that abort has ended. Without the
	// confirmation (collective.WithoutConfirm, for measuring the vendor
	// alone) rank 1 returns what its buffer held: the hazard.
	require.NoError(t, comms[1].Device().Memset(ctx, ranks[1].out.Ptr(), 0, 4*count))
	err := call(0, 500*time.Millisecond)
	require.ErrorIs(t, err, backend.ErrTimeout, "rank 0")
	require.Eventually(t, v.wasAborted, 10*time.Second, time.Millisecond, "rank 0 aborts its vendor communicator")
	require.NoError(t, callWithoutDeadline(1, collective.WithoutConfirm()))
	require.Zero(t, sum(1), "the aborted vendor wrote nothing")

	// With the confirmation, rank 1's next call fails naming rank 0.
	err = callWithoutDeadline(1)
	require.Error(t, err, "rank 1 returned a result its peer never contributed to (sum %v)", sum(1))
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "rank 0 did not arrive on channel 129")
}
