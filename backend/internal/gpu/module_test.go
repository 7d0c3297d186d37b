package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

func TestPackParamsMatchesMarshalArgs(t *testing.T) {
	all := kernels.AllReduceArgs{Bufs: 0x7f0000000000, Pads: 0x7f0000100000, Input: 0x7f0000200000, Output: 0x7f0000300000,
		Count: 4096, Rank: 1, World: 2, DType: backend.BFloat16, Status: 0x7f0000400000, TimeoutNs: 5e9}.Args()
	sig := kernels.SignalArgs{Pads: 1, Rank: 2, World: 3, Peer: 4, Channel: 5, Mask: 6, Status: 7, TimeoutNs: 8}.Args()
	cases := [][]backend.Arg{
		nil,
		{backend.U32(7)},
		{backend.Ptr(0x1000), backend.U32(5), backend.U64(1 << 40)},
		{backend.U32(1), backend.U32(2), backend.U32(3)},
		{backend.I32(-1), backend.F64(2.5), backend.F32(1.5), backend.I64(-9)},
		{backend.U32(1), backend.Ptr(2), backend.U32(3), backend.Ptr(4), backend.U32(5)},
		all, sig,
	}
	var long []backend.Arg
	for i := range 40 {
		long = append(long, backend.U32(uint32(i)), backend.U64(uint64(i)<<33))
	}
	cases = append(cases, long)
	for i, args := range cases {
		want, _ := backend.MarshalArgs(args)
		n, err := paramSize(args)
		require.NoError(t, err)
		require.Equal(t, len(want), n, "case %d", i)
		got := make([]byte, n)
		packParams(got, args)
		require.Equal(t, want, got, "case %d", i)
	}
	// The C layouts of entry.cuh: 88 and 48 bytes.
	n, _ := paramSize(all)
	require.Equal(t, 88, n)
	n, _ = paramSize(sig)
	require.Equal(t, 48, n)

	_, err := paramSize([]backend.Arg{backend.U32(1), {}})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "argument 1 has size 0")
}

func TestPackParamsAllocatesNothing(t *testing.T) {
	args := kernels.AllReduceArgs{Count: 1, World: 2}.Args()
	s := &Stream{params: new([inlineParams / 8]uint64)}
	allocs := testing.AllocsPerRun(1000, func() {
		n, err := paramSize(args)
		if err != nil {
			panic(err)
		}
		packParams(wordBytes(s.params[:])[:n], args)
	})
	require.Zero(t, allocs)
}

func TestAlignUp(t *testing.T) {
	const g = 2 << 20
	require.Equal(t, g, AlignUp(1, g))
	require.Equal(t, g, AlignUp(g, g))
	require.Equal(t, 2*g, AlignUp(g+1, g))
	require.Equal(t, 5, AlignUp(5, 0))
}
