//go:build cuda

package cuda

// The TestNCCL… tests run anywhere: the type mapping, errors, the store
// bootstrap, and the loader (against a missing library, the C library and a
// mock libnccl built here with the C compiler). The TestGPUNCCL… tests need
// two GPUs and NCCL and skip, saying why, without them. Build them on a
// development machine and run them on the GPU host:
//
//	go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
//	.gpu/cuda.test -test.run NCCL -test.v

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/symmetric/store"
)

// TestNCCLErrors: the shims' own result spaces, on this backend: a failed
// context switch is the driver's error, a failed communicator NCCL's
// asynchronous one. (The result names and codes are gpu.CCL's tests.)
func TestNCCLErrors(t *testing.T) {
	b, err := Open(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	require.NoError(t, b.nccl.Check("ncclAllReduce", 0))
	err = b.nccl.Check("ncclAllReduce", 0x10000|201)
	var de *DriverError
	require.ErrorAs(t, err, &de)
	require.Equal(t, "cuCtxSetCurrent", de.Op)
	require.Equal(t, 201, de.Result)
	err = b.nccl.Check("ncclAllReduce", 0x20000|6)
	var ne *NCCLError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, "ncclCommGetAsyncError", ne.Op)
	require.Equal(t, 6, ne.Result)
	require.ErrorIs(t, gpu.Wrap(err, "all-reduce"), backend.ErrPeerFailed)
}

func TestNCCLClosedBackend(t *testing.T) {
	b, err := Open(t.Context())
	require.NoError(t, err)
	require.NoError(t, b.Close())
	_, err = b.NCCLVersion()
	require.ErrorIs(t, err, backend.ErrClosed)
	require.NoError(t, b.ReleaseFallback(nil))
	err = b.FallbackAllReduce(context.Background(), nil, nil, 0, 0, 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

// buildMockNCCL builds the mock library (gputest.MockCCLSource) as
// dir/libnccl.so.2, or says why it could not.
func buildMockNCCL(t *testing.T, dir string) (string, error) {
	return gputest.BuildMockCCL(t, dir, "libnccl.so.2")
}

// Environment of TestNCCLLoader's child: the marker, and the mock library's
// path ("" when it could not be built).
const (
	envNCCLChild = "INTRANODE_CUDA_TEST_NCCL_CHILD"
	envNCCLMock  = "INTRANODE_CUDA_TEST_NCCL_MOCK"
)

// missingNCCL is a library path that does not exist.
const missingNCCL = "/nonexistent/intranode/libnccl.so.2"

// uniqueIDBytes is the size of an ncclUniqueId (GPU_CCL_UNIQUE_ID_BYTES).
const uniqueIDBytes = 128

// TestNCCLLoader runs the loader checks in a fresh process (NCCL is loaded
// once per process), with INTRANODE_NCCL_LIBRARY pointing nowhere, NVLS
// asked for and NCCL_RUNTIME_CONNECT unset.
func TestNCCLLoader(t *testing.T) {
	mock, err := buildMockNCCL(t, t.TempDir())
	if err != nil {
		t.Logf("the child skips the mock NCCL: %v", err)
	}
	gputest.RunChildWith(t, gputest.Child{Unset: []string{"NCCL_RUNTIME_CONNECT", "NCCL_NVLS_ENABLE", "NCCL_SOCKET_RETRY_CNT", "NCCL_RAS_ENABLE", EnvNCCLLibrary},
		Env: []string{envNCCLChild + "=1", envNCCLMock + "=" + mock, "NCCL_NVLS_ENABLE=1", EnvNCCLLibrary + "=" + missingNCCL}},
		"TestNCCLLoaderChild")
}

func TestNCCLLoaderChild(t *testing.T) {
	if os.Getenv(envNCCLChild) == "" {
		t.Skip("runs only as TestNCCLLoader's child process")
	}
	b, err := Open(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	b.SetNCCLTimeout(time.Second)

	// The override names a missing file: a clear ErrUnavailable, with or
	// without a driver.
	_, err = b.NCCLVersion()
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, missingNCCL+" not found: ")
	require.ErrorContains(t, err, EnvNCCLLibrary)
	// NCCL's environment was set before the first attempt: multicast off
	// whatever was asked, connections made at init.
	require.Equal(t, "0", os.Getenv("NCCL_NVLS_ENABLE"))
	require.Equal(t, "0", os.Getenv("NCCL_RUNTIME_CONNECT"))
	// Refused connections retried for at most the 1 s timeout:
	// 100+200+300+400 ms.
	require.Equal(t, "4", os.Getenv("NCCL_SOCKET_RETRY_CNT"))
	require.Equal(t, "0", os.Getenv("NCCL_RAS_ENABLE"))

	// A library without NCCL's entry points (glibc's name; elsewhere this
	// part has nothing to open).
	t.Setenv(EnvNCCLLibrary, "libc.so.6")
	_, err = b.NCCLVersion()
	require.ErrorIs(t, err, backend.ErrUnavailable)
	if !strings.Contains(err.Error(), "libc.so.6 not found") {
		require.ErrorContains(t, err, "libc.so.6 is not a usable NCCL")
		require.ErrorContains(t, err, "entry point ncclGetVersion missing")
	}

	mock := os.Getenv(envNCCLMock)
	if mock == "" {
		t.Log("no mock NCCL: skipping the binding checks")
		return
	}
	// Failed loads leave nothing behind: the mock loads afterwards.
	t.Setenv(EnvNCCLLibrary, mock)
	v, err := b.NCCLVersion()
	require.NoError(t, err)
	require.Equal(t, "2.28.9", v)
	id, r := b.nccl.Shims().UniqueID()
	require.Zero(t, r)
	require.Len(t, id, uniqueIDBytes)
	require.Equal(t, bytes.Repeat([]byte{7}, uniqueIDBytes-1), id[:uniqueIDBytes-1])
	err = b.nccl.Check("ncclCommInitRank", 5)
	require.ErrorIs(t, gpu.Wrap(err, "creating"), backend.ErrInvalidArgument)
	require.EqualError(t, err, "ncclCommInitRank: ncclInvalidUsage (5): invalid usage (mock) (mock last error)")
	// Once loaded, the library stays: another override changes nothing.
	t.Setenv(EnvNCCLLibrary, missingNCCL)
	v, err = b.NCCLVersion()
	require.NoError(t, err)
	require.Equal(t, "2.28.9", v)
}

// The GPU tests.

const ncclGroupTimeout = 60 * time.Second

// openNCCLGroup rendezvouses a 2-rank collective.Comm on devices 0 and 1
// of b (each rank a goroutine of this process) and releases its NCCL
// communicators and closes it at the end of the test. It skips without two
// GPUs, two that form a group, or NCCL (unless needNCCL is false).
func openNCCLGroup(t *testing.T, b *Backend, needNCCL bool) []*collective.Comm {
	t.Helper()
	n, err := b.DeviceCount(t.Context())
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("needs 2 GPUs, have %d", n)
	}
	if needNCCL {
		v, err := b.NCCLVersion()
		if err != nil {
			require.ErrorIs(t, err, backend.ErrUnavailable)
			t.Skipf("no NCCL: %v", err)
		}
		t.Logf("NCCL %s", v)
	}
	st := store.NewMem()
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	const world = 2
	comms := make([]*collective.Comm, world)
	for r := range world {
		dev := r
		c, err := collective.New(st, r, world, collective.Options{Backend: b, Device: &dev, Timeout: ncclGroupTimeout})
		require.NoError(t, err)
		comms[r] = c
	}
	t.Cleanup(func() {
		for _, c := range comms {
			require.NoError(t, b.ReleaseFallback(c))
		}
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
	})
	err = eachRank(world, func(r int) error {
		ctx, cancel := context.WithTimeout(context.Background(), ncclGroupTimeout)
		defer cancel()
		return comms[r].Rendezvous(ctx)
	})
	if errors.Is(err, collective.ErrTopology) || errors.Is(err, collective.ErrNotSupported) {
		t.Skipf("devices 0 and 1 do not form a group: %v", err)
	}
	require.NoError(t, err)
	return comms
}

// eachRank runs f for every rank concurrently and joins their errors.
func eachRank(world int, f func(r int) error) error {
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			if err := f(r); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ncclRank is one rank's stream and buffers.
type ncclRank struct {
	rank    int
	c       *collective.Comm // nil in the mock test
	d       backend.Device
	s       backend.Stream
	in, out backend.Allocation
}

func ncclRanks(t *testing.T, comms []*collective.Comm, bytes int) []*ncclRank {
	t.Helper()
	ctx := timeout(t)
	out := make([]*ncclRank, len(comms))
	for r, c := range comms {
		d := c.Device()
		require.NotNil(t, d)
		out[r] = newNCCLRank(ctx, t, r, d, bytes)
		out[r].c = c
	}
	return out
}

// newNCCLRank gives rank a stream and two buffers of bytes on d.
func newNCCLRank(ctx context.Context, t *testing.T, rank int, d backend.Device, bytes int) *ncclRank {
	t.Helper()
	in := gputest.Alloc(t, d, bytes)
	o := gputest.Alloc(t, d, bytes)
	return &ncclRank{rank: rank, d: d, s: newStream(t, d), in: in, out: o}
}

// check fills rank's input with the test pattern of seed, runs call, waits
// for the stream and compares the result (in dst) with the exact
// all-reduce.
func (k *ncclRank) check(ctx context.Context, dtype backend.DType, op backend.ReduceOp, count, world, seed int,
	dst backend.DevicePtr, call func() error) error {
	input := make([]byte, count*dtype.Size())
	numeric.Pattern(dtype, input, count, k.rank, seed)
	if err := k.d.CopyToDevice(ctx, k.in.Ptr(), input); err != nil {
		return err
	}
	if err := call(); err != nil {
		return err
	}
	if err := k.s.Synchronize(ctx); err != nil {
		return err
	}
	got := make([]byte, len(input))
	if err := k.d.CopyFromDevice(ctx, got, dst); err != nil {
		return err
	}
	want := make([]byte, len(input))
	numeric.Expected(dtype, op, want, count, world, seed)
	if wrong, first := numeric.Compare(dtype, got, want, count); wrong > 0 {
		return fmt.Errorf("%v %v count %d: %d elements wrong, first %v", dtype, op, count, wrong, first)
	}
	return nil
}

func TestGPUNCCLAllReduce(t *testing.T) {
	b := openGPU(t)
	comms := openNCCLGroup(t, b, true)
	const maxCount = 1<<20 + 3
	ranks := ncclRanks(t, comms, maxCount*8)
	seed := 0
	type tc struct {
		dtype   backend.DType
		op      backend.ReduceOp
		count   int
		inPlace bool
	}
	var cases []tc
	for _, dtype := range []backend.DType{backend.BFloat16, backend.Float32} {
		for _, count := range []int{1, 7, 4099, maxCount} {
			for _, inPlace := range []bool{false, true} {
				cases = append(cases, tc{dtype, backend.Sum, count, inPlace})
			}
		}
	}
	for _, dtype := range backend.DTypes {
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Max, backend.Min} {
			cases = append(cases, tc{dtype, op, 4099, false})
		}
	}
	for _, k := range cases {
		seed++
		err := eachRank(len(ranks), func(r int) error {
			rk := ranks[r]
			ctx, cancel := context.WithTimeout(context.Background(), ncclGroupTimeout)
			defer cancel()
			dst := rk.out.Ptr()
			var opts []collective.CallOption
			if k.inPlace {
				dst = rk.in.Ptr()
			} else {
				opts = append(opts, collective.Output(dst))
			}
			return rk.check(ctx, k.dtype, k.op, k.count, len(ranks), seed, dst, func() error {
				w, err := rk.c.AllReduce(ctx, rk.s, rk.in.Ptr(), k.count, k.dtype, k.op, collective.None, opts...)
				if err != nil {
					return err
				}
				return w.Close()
			})
		})
		require.NoError(t, err, "%+v", k)
	}
}

func TestGPUNCCLGraphCapture(t *testing.T) {
	b := openGPU(t)
	comms := openNCCLGroup(t, b, true)
	const count = 4099
	dtype := backend.BFloat16
	ranks := ncclRanks(t, comms, count*dtype.Size())
	ctx := timeout(t)

	// The first call creates the communicators; it cannot be captured.
	require.NoError(t, eachRank(len(ranks), func(r int) error {
		rk := ranks[r]
		return rk.check(ctx, dtype, backend.Sum, count, len(ranks), 1, rk.out.Ptr(), func() error {
			w, err := rk.c.AllReduce(ctx, rk.s, rk.in.Ptr(), count, dtype, backend.Sum, collective.None, collective.Output(rk.out.Ptr()))
			if err != nil {
				return err
			}
			return w.Close()
		})
	}))

	graphs := make([]backend.Graph, len(ranks))
	for r, rk := range ranks {
		require.NoError(t, rk.s.BeginCapture())
		w, err := rk.c.AllReduce(ctx, rk.s, rk.in.Ptr(), count, dtype, backend.Sum, collective.None, collective.Output(rk.out.Ptr()))
		require.NoError(t, err, "rank %d", r)
		require.NoError(t, w.Close())
		g, err := rk.s.EndCapture()
		require.NoError(t, err, "rank %d", r)
		// Registered after the comms' cleanup, so closed before their NCCL
		// communicators are released (which waits for such graphs).
		closeLater(t, g)
		graphs[r] = g
	}
	for seed := 2; seed < 5; seed++ {
		require.NoError(t, eachRank(len(ranks), func(r int) error {
			rk := ranks[r]
			return rk.check(ctx, dtype, backend.Sum, count, len(ranks), seed, rk.out.Ptr(), func() error {
				return graphs[r].Launch(rk.s)
			})
		}), "replay with seed %d", seed)
	}
}

func TestGPUNCCLTimeout(t *testing.T) {
	b := openGPU(t)
	const limit = 2 * time.Second
	b.SetNCCLTimeout(limit)
	comms := openNCCLGroup(t, b, true)
	ranks := ncclRanks(t, comms, 64)
	rk := ranks[0]
	ctx := timeout(t)

	// Only rank 0 makes the call: it ends in ErrTimeout naming rank 1, at
	// the NCCL timeout.
	start := time.Now()
	_, err := rk.c.AllReduce(ctx, rk.s, rk.in.Ptr(), 16, backend.Float32, backend.Sum, collective.None)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "ranks [1] did not make their first call")
	require.GreaterOrEqual(t, elapsed, limit)
	require.Less(t, elapsed, limit+time.Second+2*time.Second)
	t.Logf("rank 0 gave up after %v: %v", elapsed.Round(time.Millisecond), err)

	// The failure sticks: the next call fails at once.
	start = time.Now()
	_, err = rk.c.AllReduce(ctx, rk.s, rk.in.Ptr(), 16, backend.Float32, backend.Sum, collective.None)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.Less(t, time.Since(start), time.Second)
}

// envNCCLMockChild marks TestNCCLMockEndToEnd's child process.
const envNCCLMockChild = "INTRANODE_CUDA_TEST_NCCL_MOCK_CHILD"

// TestNCCLMockEndToEnd runs the fallback all-reduce (store bootstrap,
// ncclCommInitRank with the context current, the all-reduce on the
// caller's stream, failures, release and Close) against the mock driver and
// the mock NCCL, in a child process that loads both: the whole binding on a
// machine without a GPU. Only collective.Comm is left out (its rendezvous
// needs NVML); TestGPUNCCLAllReduce covers it.
func TestNCCLMockEndToEnd(t *testing.T) {
	if os.Getenv(envNCCLMockChild) != "" || os.Getenv(envMockChild) != "" {
		t.Skip("already running against the mocks")
	}
	dir := t.TempDir()
	mock, err := buildMockNCCL(t, dir)
	if err != nil {
		t.Skipf("cannot build the mock NCCL: %v", err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	src := filepath.Join(dir, "mockcuda.c")
	require.NoError(t, os.WriteFile(src, mockCUDA, 0o600))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, "libcuda.so.1"), src).CombinedOutput()
	require.NoError(t, err, "building the mock driver:\n%s", out)

	gputest.RunChild(t, "TestNCCLMockEndToEndChild", envNCCLMockChild+"=1", EnvNCCLLibrary+"="+mock,
		"LD_LIBRARY_PATH="+dir+":"+os.Getenv("LD_LIBRARY_PATH"))
}

func TestNCCLMockEndToEndChild(t *testing.T) {
	if os.Getenv(envNCCLMockChild) == "" {
		t.Skip("runs only as TestNCCLMockEndToEnd's child process")
	}
	// The mock NCCL keeps the number of communicators made and not
	// aborted in this file.
	livePath := filepath.Join(t.TempDir(), "live")
	t.Setenv("MOCK_NCCL_LIVE", livePath)
	live := func() int {
		b, err := os.ReadFile(livePath)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		require.NoError(t, err)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		return n
	}
	b := openGPU(t)
	b.SetNCCLTimeout(5 * time.Second)
	ctx := timeout(t)
	st := store.NewMem()
	defer func() { require.NoError(t, st.Close()) }()
	const world, maxCount = 2, 4099
	ranks := make([]*ncclRank, world)
	for r := range world {
		ranks[r] = newNCCLRank(ctx, t, r, openDevice(t, b, r), maxCount*4)
	}
	group := func(name string) []gpu.CCLGroup {
		gs := make([]gpu.CCLGroup, world)
		for r := range gs {
			gs[r] = gpu.CCLGroup{Key: new(int), Store: st, Name: name, Rank: r, World: world, SendRecv: true}
		}
		return gs
	}
	call := func(rk *ncclRank, g gpu.CCLGroup, dst backend.DevicePtr, count int, dtype backend.DType, op backend.ReduceOp) error {
		return b.nccl.Collective(ctx, rk.s, g, collective.OpAllReduce, rk.in.Ptr(), dst, count, dtype, op, 0)
	}
	seed := 0
	allReduce := func(gs []gpu.CCLGroup) {
		t.Helper()
		for _, dtype := range []backend.DType{backend.Float32, backend.Int32} {
			for _, op := range []backend.ReduceOp{backend.Sum, backend.Max, backend.Min} {
				for _, count := range []int{1, maxCount} {
					for _, inPlace := range []bool{false, true} {
						seed++
						require.NoError(t, eachRank(world, func(r int) error {
							rk := ranks[r]
							dst := rk.out.Ptr()
							if inPlace {
								dst = rk.in.Ptr()
							}
							return rk.check(ctx, dtype, op, count, world, seed, dst, func() error {
								return call(rk, gs[r], dst, count, dtype, op)
							})
						}), "%v %v count %d in place %v", dtype, op, count, inPlace)
					}
				}
			}
		}
	}

	// The default creation is guarded: each rank's communicator is a
	// non-blocking parent and the blocking duplicate split from it.
	before := live()
	a := group("IntraNodeComm0")
	allReduce(a)
	require.Equal(t, before+2*world, live(), "communicators made by %d ranks under the default creation", world)
	ncclMovers(ctx, t, b, ranks, a)

	// The inter-host communicator of collective.HostGroups is the same
	// NCCL binding under its own name and store keys.
	engines := make([]collective.InterHost, world)
	for r := range world {
		e, err := b.NewInterHost(ctx, collective.InterHostConfig{Store: st, Name: "interhost/rail0", Rank: r, World: world})
		require.NoError(t, err)
		engines[r] = e
	}
	seed++
	require.NoError(t, eachRank(world, func(r int) error {
		rk := ranks[r]
		return rk.check(ctx, backend.Float32, backend.Sum, 1000, world, seed, rk.out.Ptr(), func() error {
			return engines[r].AllReduce(ctx, rk.s, rk.in.Ptr(), rk.out.Ptr(), 1000, backend.Float32, backend.Sum)
		})
	}))
	for _, e := range engines {
		require.NoError(t, e.Err())
		require.NoError(t, e.Close())
	}
	// A communicator of one rank (the soak's warm-up makes one) has no
	// peer to connect to.
	one, err := b.NewInterHost(ctx, collective.InterHostConfig{Store: st, Name: "interhost/one", Rank: 0, World: 1})
	require.NoError(t, err)
	seed++
	require.NoError(t, ranks[0].check(ctx, backend.Float32, backend.Sum, 1000, 1, seed, ranks[0].out.Ptr(), func() error {
		return one.AllReduce(ctx, ranks[0].s, ranks[0].in.Ptr(), ranks[0].out.Ptr(), 1000, backend.Float32, backend.Sum)
	}))
	require.NoError(t, one.Close())
	_, err = b.NewInterHost(ctx, collective.InterHostConfig{Store: st, Name: "x", Rank: 2, World: 2})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)

	// The communicator belongs to its rank's device.
	err = call(ranks[1], a[0], ranks[1].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "is on device 0, the stream on device 1")

	// Released communicators are aborted once; the comms' next calls
	// create new ones, under a new generation of store keys.
	for _, g := range a {
		require.NoError(t, b.nccl.Release(g.Key))
		require.NoError(t, b.nccl.Release(g.Key))
	}
	allReduce(a)

	// A communicator cannot be created while the stream captures.
	c := group("IntraNodeComm1")
	require.NoError(t, ranks[0].s.BeginCapture())
	err = call(ranks[0], c[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "make one call before BeginCapture")
	g, err := ranks[0].s.EndCapture()
	require.NoError(t, err)
	require.NoError(t, g.Close())

	// A rank that never comes: ErrTimeout at the NCCL timeout, naming it,
	// and the failure sticks.
	const limit = 300 * time.Millisecond
	b.SetNCCLTimeout(limit)
	start := time.Now()
	err = call(ranks[0], c[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "ranks [1] did not make their first call")
	require.Less(t, time.Since(start), limit+time.Second+time.Second)
	start = time.Now()
	err = call(ranks[0], c[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.Less(t, time.Since(start), 100*time.Millisecond)

	// The caller's deadline bounds the creation too: with the NCCL
	// timeout an hour, a call whose context ends in 300 ms fails then
	// (it waited the hour before), naming the missing rank.
	b.SetNCCLTimeout(time.Hour)
	e := group("IntraNodeCommDeadline")
	short, cancelShort := context.WithTimeout(ctx, limit)
	start = time.Now()
	err = b.nccl.Collective(short, ranks[0].s, e[0], collective.OpAllReduce, ranks[0].in.Ptr(), ranks[0].out.Ptr(), 1, backend.Float32,
		backend.Sum, 0)
	cancelShort()
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "ranks [1] did not make their first call")
	require.Less(t, time.Since(start), limit+time.Second+time.Second)
	b.SetNCCLTimeout(5 * time.Second)

	// Communicators made each way: the calls work on all of them (the
	// ones above are guarded, the default, whose movers' all-to-all after
	// an all-reduce needs the duplicate to share its parent's
	// connections).
	for _, mode := range []backend.CCLCreation{backend.CCLBlocking, backend.CCLNonBlocking} {
		b.SetNCCLCreation(mode)
		gs := group("IntraNodeComm-" + mode.String())
		allReduce(gs)
		ncclMovers(ctx, t, b, ranks, gs)
	}

	// A rank that dies inside the creation, after every rank has joined
	// (in ncclCommInitRank, or in the guarded creation's ncclCommSplit):
	// the survivor's creation ends at the NCCL timeout and is aborted
	// before the call returns, so nothing of it is left running (a
	// blocking ncclCommInitRank would still be waiting for the dead rank
	// on a goroutine of its own).
	b.SetNCCLTimeout(limit)
	for _, tc := range []struct {
		mode      backend.CCLCreation
		env, call string
	}{
		{backend.CCLGuarded, "MOCK_NCCL_INIT_FAIL_RANK", "ncclCommInitRank"},
		{backend.CCLGuarded, "MOCK_NCCL_SPLIT_FAIL_RANK", "ncclCommSplit"},
		{backend.CCLNonBlocking, "MOCK_NCCL_INIT_FAIL_RANK", "ncclCommInitRank"},
	} {
		b.SetNCCLCreation(tc.mode)
		t.Setenv(tc.env, "1")
		before = live()
		dies := group("IntraNodeCommDies-" + tc.mode.String() + "-" + tc.call)
		errs := make([]error, world)
		start = time.Now()
		_ = eachRank(world, func(r int) error {
			errs[r] = call(ranks[r], dies[r], ranks[r].out.Ptr(), 1, backend.Float32, backend.Sum)
			return nil
		})
		require.NoError(t, os.Unsetenv(tc.env))
		require.ErrorContains(t, errs[1], tc.call+": ncclSystemError", tc.mode)
		require.ErrorIs(t, errs[0], backend.ErrTimeout, tc.mode)
		require.ErrorContains(t, errs[0], "did not finish within", tc.mode)
		require.Less(t, time.Since(start), limit+time.Second+time.Second, tc.mode)
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		require.NotContains(t, string(stacks), "(*CCL).init", "%v, %s: a creation goroutine outlived its call", tc.mode, tc.env)
		// Every communicator the failed creations made is aborted,
		// the half-made duplicate that aborting the guarded parent
		// writes included.
		require.Equal(t, before, live(), "%v, %s: communicators left unaborted", tc.mode, tc.env)
		err = call(ranks[0], dies[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
		require.ErrorIs(t, err, backend.ErrTimeout, "the failure sticks")
	}
	b.SetNCCLTimeout(5 * time.Second)
	b.SetNCCLCreation(backend.CCLBlocking)

	// A communicator NCCL reports failed fails this call and every later
	// one.
	t.Setenv("MOCK_NCCL_ASYNC", "6")
	err = eachRank(world, func(r int) error {
		return call(ranks[r], a[r], ranks[r].out.Ptr(), 1, backend.Float32, backend.Sum)
	})
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	require.ErrorContains(t, err, "ncclCommGetAsyncError: ncclRemoteError (6)")
	require.NoError(t, os.Unsetenv("MOCK_NCCL_ASYNC"))
	err = call(ranks[0], a[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrPeerFailed)

	// A call blocked inside NCCL (a group of sends and receives whose
	// peer never comes) ends at the caller's deadline: the communicator is
	// failed, stays failed, and is never aborted under the blocked call
	// (Close below aborts only the peer's, which ends the mock's wait).
	f := group("IntraNodeCommStuck")
	require.NoError(t, eachRank(world, func(r int) error {
		return call(ranks[r], f[r], ranks[r].out.Ptr(), 1, backend.Float32, backend.Sum)
	}))
	short, cancelShort = context.WithTimeout(ctx, limit)
	start = time.Now()
	err = b.nccl.Collective(short, ranks[0].s, f[0], collective.OpAllToAll, ranks[0].in.Ptr(),
		ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum, 0)
	cancelShort()
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "still connecting to its peers at the call's deadline")
	require.Less(t, time.Since(start), limit+time.Second)
	err = call(ranks[0], f[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrTimeout, "the failure sticks")

	// Close aborts what is left, each communicator once, and ends a
	// creation still waiting for its peers.
	late := make(chan error, 1)
	d := group("IntraNodeComm2")
	go func() { late <- call(ranks[0], d[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum) }()
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	require.NoError(t, b.Close())
	require.ErrorIs(t, <-late, backend.ErrClosed)
	require.Less(t, time.Since(start), time.Second+time.Second)
	err = call(ranks[0], a[0], ranks[0].out.Ptr(), 1, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrClosed)
}

// ncclMovers checks reduce-scatter, all-gather, broadcast and all-to-all
// through NCCL on the ranks' communicators (group gs), f32, out of place:
// rank r's input element i is 100*r + i.
func ncclMovers(ctx context.Context, t *testing.T, b *Backend, ranks []*ncclRank, gs []gpu.CCLGroup) {
	t.Helper()
	world := len(ranks)
	const count = 5
	for _, op := range []collective.Op{collective.OpReduceScatter, collective.OpAllGather, collective.OpBroadcast,
		collective.OpAllToAll} {
		inN, outN := op.Elements(count, world)
		require.NoError(t, eachRank(world, func(r int) error {
			rk := ranks[r]
			in := make([]byte, 4*inN)
			for i := range inN {
				binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(100*r+i)))
			}
			if err := rk.d.CopyToDevice(ctx, rk.in.Ptr(), in); err != nil {
				return err
			}
			if err := b.nccl.Collective(ctx, rk.s, gs[r], op, rk.in.Ptr(), rk.out.Ptr(), count, backend.Float32,
				backend.Sum, 1); err != nil {
				return err
			}
			if err := rk.s.Synchronize(ctx); err != nil {
				return err
			}
			got := make([]byte, 4*outN)
			if err := rk.d.CopyFromDevice(ctx, got, rk.out.Ptr()); err != nil {
				return err
			}
			for i := range outN {
				var want float32
				switch op {
				case collective.OpReduceScatter:
					for q := range world {
						want += float32(100*q + r*count + i)
					}
				case collective.OpAllGather:
					want = float32(100*(i/count) + i%count)
				case collective.OpBroadcast:
					want = float32(100 + i)
				case collective.OpAllToAll:
					want = float32(100*(i/count) + r*count + i%count)
				}
				if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != want {
					return fmt.Errorf("%v rank %d element %d: got %v, want %v", op, r, i, v, want)
				}
			}
			return nil
		}))
	}
	// In place, NCCL's all-to-all would overwrite blocks it has yet to
	// send: refused as unavailable, so the comm takes its kernels.
	err := b.FallbackMove(ctx, ranks[0].s, nil, collective.OpAllToAll, ranks[0].in.Ptr(), ranks[0].in.Ptr(), 1,
		backend.Float32, backend.Sum, 0)
	require.ErrorIs(t, err, backend.ErrUnavailable)
}

// envNCCLMissingChild marks TestGPUNCCLMissingLibrary's child process.
const envNCCLMissingChild = "INTRANODE_CUDA_TEST_NCCL_MISSING_CHILD"

// TestGPUNCCLMissingLibrary checks, in a fresh process whose
// INTRANODE_NCCL_LIBRARY points nowhere, that the fallback all-reduce of a
// real comm reports the missing library.
func TestGPUNCCLMissingLibrary(t *testing.T) {
	b := openGPU(t)
	if n, err := b.DeviceCount(t.Context()); err != nil || n < 2 {
		t.Skipf("needs 2 GPUs: %d, %v", n, err)
	}
	gputest.RunChildWith(t, gputest.Child{Env: []string{envNCCLMissingChild + "=1", EnvNCCLLibrary + "=" + missingNCCL},
		MaySkip: true}, "TestGPUNCCLMissingLibraryChild")
}

func TestGPUNCCLMissingLibraryChild(t *testing.T) {
	if os.Getenv(envNCCLMissingChild) == "" {
		t.Skip("runs only as TestGPUNCCLMissingLibrary's child process")
	}
	b := openGPU(t)
	comms := openNCCLGroup(t, b, false)
	ranks := ncclRanks(t, comms, 64)
	rk := ranks[0]
	// The backend reports the missing library; collective.Comm then falls
	// back to its own kernels (so AllReduce itself still works).
	err := b.FallbackAllReduce(context.Background(), rk.s, rk.c, rk.in.Ptr(), rk.in.Ptr(), 16, backend.Float32, backend.Sum)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, missingNCCL+" not found: ")
	var nccl *backend.Diagnostic
	for _, d := range b.Diagnostics(timeout(t)) {
		if d.Check == "nccl" {
			nccl = &d
		}
	}
	require.NotNil(t, nccl)
	require.False(t, nccl.OK)
	require.Contains(t, nccl.Detail, "not found")
}
