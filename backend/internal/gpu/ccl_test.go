package gpu

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

func TestCCLTypeMapping(t *testing.T) {
	// ncclDataType_t and ncclRedOp_t as nccl.h numbers them.
	dtypes := map[backend.DType]int{
		backend.Float32:  7, // ncclFloat32
		backend.Float16:  6, // ncclFloat16
		backend.BFloat16: 9, // ncclBfloat16
		backend.Float64:  8, // ncclFloat64
		backend.Int32:    2, // ncclInt32
	}
	require.Len(t, dtypes, len(backend.DTypes), "every dtype has an NCCL type")
	for _, d := range backend.DTypes {
		got, ok := cclDataType(d)
		require.True(t, ok, "%v", d)
		require.Equal(t, dtypes[d], got, "%v", d)
	}
	_, ok := cclDataType(backend.DType(99))
	require.False(t, ok)

	ops := map[backend.ReduceOp]int{
		backend.Sum: 0, // ncclSum
		backend.Max: 2, // ncclMax
		backend.Min: 3, // ncclMin
		backend.Avg: 4, // ncclAvg
	}
	for o, want := range ops {
		got, ok := cclRedOp(o)
		require.True(t, ok, "%v", o)
		require.Equal(t, want, got, "%v", o)
	}
	_, ok = cclRedOp(backend.ReduceOp(7))
	require.False(t, ok)
}

func TestCCLVersionFormat(t *testing.T) {
	for code, want := range map[int]string{
		22809: "2.28.9",
		21003: "2.10.3",
		21903: "2.19.3",
		2804:  "2.8.4",
		2708:  "2.7.8",
	} {
		require.Equal(t, want, FormatCCLVersion(code), "%d", code)
	}
}

// fakeShims answer the error strings of CCL.Check; their other calls are
// not made by the tests that use them.
type fakeShims struct{ CCLShims }

func (fakeShims) ErrorString(r int) string { return fmt.Sprintf("description %d", r) }
func (fakeShims) LastError() string        { return "" }
func (fakeShims) DriverError(r int) error {
	return backend.Errorf(backend.CodeUnavailable, "driver result %d", r)
}

func TestCCLErrors(t *testing.T) {
	l := NewCCL(CCLConfig{Backend: "test", Lib: "NCCL", Shims: fakeShims{}})
	require.NoError(t, l.Check("ncclAllReduce", 0))
	for r, code := range map[int]backend.Code{
		1: backend.CodeInternal,        // ncclUnhandledCudaError
		2: backend.CodeInternal,        // ncclSystemError
		3: backend.CodeInternal,        // ncclInternalError
		4: backend.CodeInvalidArgument, // ncclInvalidArgument
		5: backend.CodeInvalidArgument, // ncclInvalidUsage
		6: backend.CodePeerFailed,      // ncclRemoteError
		7: backend.CodeTimeout,         // ncclInProgress
		8: backend.CodeTimeout,         // ncclTimeout
		9: backend.CodeInternal,
	} {
		e := &CCLError{Op: "ncclCommInitRank", Result: r}
		require.Equal(t, code, e.Code(), "result %d", r)
		err := Wrap(e, "creating")
		require.Equal(t, code, backend.CodeOf(err), "result %d", r)
		var ce *CCLError
		require.ErrorAs(t, err, &ce)
	}
	e := &CCLError{Op: "ncclAllReduce", Result: 4, Description: "invalid argument", Detail: "bad count"}
	require.Equal(t, "ncclAllReduce: ncclInvalidArgument (4): invalid argument (bad count)", e.Error())
	require.Equal(t, "ncclResult_t(42)", (&CCLError{Result: 42}).Name())

	// The shims' own result spaces: a failed switch of device is the
	// driver's error, a failed communicator the library's asynchronous
	// one.
	err := l.Check("ncclAllReduce", CCLDriverFailed|201)
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.EqualError(t, err, "driver result 201")
	err = l.Check("ncclAllReduce", CCLAsync|6)
	var ce *CCLError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "ncclCommGetAsyncError", ce.Op)
	require.Equal(t, 6, ce.Result)
	require.Equal(t, "description 6", ce.Description)
	require.ErrorIs(t, Wrap(err, "all-reduce"), backend.ErrPeerFailed)
}

func fakeID() ([]byte, error) { return bytes.Repeat([]byte{0xab}, cclUniqueIDBytes), nil }

func TestCCLBootstrap(t *testing.T) {
	st := store.NewMem()
	defer func() { require.NoError(t, st.Close()) }()
	const world = 3
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ids := make([][]byte, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { ids[r], errs[r] = bootstrap(ctx, st, "IntraNodeComm0", r, world, fakeID) })
	}
	wg.Wait()
	want, _ := fakeID()
	for r := range world {
		require.NoError(t, errs[r], "rank %d", r)
		require.Equal(t, want, ids[r], "rank %d", r)
	}
	v, err := st.Get(ctx, "IntraNodeComm0/nccl/1/id")
	require.NoError(t, err)
	require.Equal(t, want, v)

	// Recreated communicators meet under the next generation's keys.
	for r := range world {
		wg.Go(func() { ids[r], errs[r] = bootstrap(ctx, st, "IntraNodeComm0", r, world, fakeID) })
	}
	wg.Wait()
	for r := range world {
		require.NoError(t, errs[r], "rank %d", r)
	}
	ok, err := st.Check(ctx, "IntraNodeComm0/nccl/2/id", "IntraNodeComm0/nccl/2/join/2")
	require.NoError(t, err)
	require.True(t, ok)
}

func TestCCLBootstrapMissingRank(t *testing.T) {
	st := store.NewMem()
	defer func() { require.NoError(t, st.Close()) }()
	const wait = 300 * time.Millisecond

	// Rank 1 never comes: rank 0 gives up at its deadline and names it.
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	start := time.Now()
	_, err := bootstrap(ctx, st, "g0", 0, 2, fakeID)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "ranks [1] did not make their first call")
	require.Less(t, time.Since(start), wait+missingCheckTimeout+time.Second)

	// Rank 1 comes after rank 0 gave up: it finds every rank joined but
	// the generation abandoned, and fails at once instead of entering NCCL.
	start = time.Now()
	_, err = bootstrap(t.Context(), st, "g0", 1, 2, fakeID)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "a rank stopped waiting for the others")
	require.Less(t, time.Since(start), time.Second)

	// Rank 0 never comes: rank 1 waits for the id in vain.
	ctx2, cancel2 := context.WithTimeout(t.Context(), wait)
	defer cancel2()
	_, err = bootstrap(ctx2, st, "g1", 1, 2, fakeID)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "rank 0 has not made its first call")

	// A failure to make the id is rank 0's error, unchanged.
	boom := backend.Errorf(backend.CodeInternal, "no id")
	_, err = bootstrap(t.Context(), st, "g2", 0, 2, func() ([]byte, error) { return nil, boom })
	require.ErrorIs(t, err, boom)

	// A malformed id is refused.
	ctx3, cancel3 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel3()
	_, err = bootstrap(ctx3, st, "g3", 0, 1, func() ([]byte, error) { return []byte{1, 2}, nil })
	require.ErrorIs(t, err, backend.ErrInternal)
	require.ErrorContains(t, err, "has 2 bytes")
}

// TestSocketRetries: the library's retries of a refused connection, with
// sleeps of 100, 200, … ms, add up to no more than the timeout.
func TestSocketRetries(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		want    int
	}{
		{0, 1},
		{250 * time.Millisecond, 1},
		{300 * time.Millisecond, 2},
		{time.Second, 4},
		{3 * time.Second, 7},
		{59500 * time.Millisecond, 34},
		{time.Hour, 34},
	} {
		require.Equal(t, tc.want, SocketRetries(tc.timeout), "timeout %v", tc.timeout)
	}
}
