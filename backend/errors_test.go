package backend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func TestErrorCodesMatch(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
		code backend.Code
	}{
		{backend.Errorf(backend.CodeTimeout, "wait %d", 3), backend.ErrTimeout, backend.CodeTimeout},
		{backend.Wrap(backend.CodeNotSupported, errors.New("x"), "op"), backend.ErrNotSupported, backend.CodeNotSupported},
		{fmt.Errorf("outer: %w", backend.Errorf(backend.CodeClosed, "gone")), backend.ErrClosed, backend.CodeClosed},
	} {
		require.ErrorIs(t, tc.err, tc.want)
		require.Equal(t, tc.code, backend.CodeOf(tc.err))
		require.NotErrorIs(t, tc.err, backend.ErrInternal)
	}
	require.Equal(t, backend.CodeUnknown, backend.CodeOf(errors.New("plain")))
	require.NoError(t, backend.Wrap(backend.CodeInternal, nil, "nothing"))
}

func TestErrorfWrapsOnce(t *testing.T) {
	err := backend.Errorf(backend.CodeTimeout, "get %q: %w", "k", context.DeadlineExceeded)
	require.Equal(t, `get "k": context deadline exceeded`, err.Error())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, backend.ErrTimeout)
	w := backend.Wrap(backend.CodeInternal, errors.New("driver 700"), "launch")
	require.Equal(t, "launch: driver 700", w.Error())
	var be *backend.Error
	require.ErrorAs(t, w, &be)
	require.Equal(t, backend.CodeInternal, be.Code)
}

func TestMarshalArgsLayout(t *testing.T) {
	buf, off := backend.MarshalArgs([]backend.Arg{backend.U32(1), backend.Ptr(0x1122334455667788), backend.U32(2), backend.U32(3), backend.U64(4)})
	require.Equal(t, []int{0, 8, 16, 20, 24}, off)
	require.Len(t, buf, 32)
	require.Equal(t, byte(0x88), buf[8])
	require.Equal(t, byte(3), buf[20])
	a := backend.F32(1.5)
	require.Equal(t, float32(1.5), a.F32())
	require.Equal(t, 4, a.Size())
	require.Equal(t, int32(-7), backend.I32(-7).I32())
	require.Equal(t, -2.25, backend.F64(-2.25).F64())
}

func TestParseNames(t *testing.T) {
	for _, d := range backend.DTypes {
		got, err := backend.ParseDType(d.String())
		require.NoError(t, err)
		require.Equal(t, d, got)
		require.True(t, d.Valid())
	}
	_, err := backend.ParseDType("complex64")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	for _, o := range []backend.ReduceOp{backend.Sum, backend.Max, backend.Min, backend.Avg} {
		got, err := backend.ParseReduceOp(o.String())
		require.NoError(t, err)
		require.Equal(t, o, got)
		require.True(t, o.Valid())
		require.Equal(t, o != backend.Avg, o.Kernel(), "%v", o)
	}
	require.Equal(t, backend.Sum, backend.Avg.Reduced())
	require.Equal(t, backend.Max, backend.Max.Reduced())
	require.False(t, backend.ReduceOp(7).Valid())
	require.False(t, backend.ReduceOp(7).Kernel())
}

func TestRegistry(t *testing.T) {
	backend.Register(backend.Driver{Name: "test-registry", Priority: -5, Open: func(context.Context, string) (backend.Backend, error) {
		return nil, errors.New("cannot open")
	}})
	require.Panics(t, func() {
		backend.Register(backend.Driver{Name: "test-registry", Open: func(context.Context, string) (backend.Backend, error) { return nil, nil }})
	})
	require.Panics(t, func() { backend.Register(backend.Driver{Name: "no-open"}) })
	require.Contains(t, backend.Drivers(), "test-registry")
	_, err := backend.Open(context.Background(), "test-registry:arg")
	require.ErrorContains(t, err, "cannot open")
	_, err = backend.Open(context.Background(), "missing-driver")
	require.ErrorIs(t, err, backend.ErrNotFound)
}
