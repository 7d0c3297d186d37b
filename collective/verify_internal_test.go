package collective

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric/store"
)

// TestNameLate: when a wait on the caller's stream ends at the call's
// deadline before the kernel has reported, the ranks' call records say
// what happened. Rank 0 holds call 5; rank 1's record decides: the same
// call leaves the error as it was, an earlier one is a late rank named as
// such, the same call number with other parameters is ErrMismatch naming
// rank 1 (a kernel waiting where the other call never signals sees that
// only at its timeout, the same instant), and a later call is a rank that
// finished this one, not a mismatch.
func TestNameLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	st := store.NewMem()
	t.Cleanup(func() { st.Close() })
	comms := make([]*Comm, 2)
	for r := range comms {
		dev := r
		c, err := New(st, r, 2, Options{Backend: b, Device: &dev, BufferSize: 64 << 10})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		comms[r] = c
	}
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() { require.NoError(t, c.Rendezvous(ctx)) })
	}
	wg.Wait()
	c := comms[0]
	info := kernels.CallInfo(kernels.OneShot, backend.BFloat16, backend.Sum)
	record := func(seq uint32, count uint64) kernels.Record {
		return kernels.Record{Call: kernels.CallTagOf(seq, info, count), Count: count, Info: info}
	}
	put := func(r int, rec kernels.Record) {
		require.NoError(t, c.dev.CopyToDevice(ctx, c.mem.SignalPad(r).Add(kernels.RecordOffset), kernels.EncodeRecord(rec)))
	}
	waited := context.DeadlineExceeded
	tests := []struct {
		name     string
		peer     kernels.Record
		mismatch bool
		contains string
	}{
		{"same call", record(5, 1024), false, ""},
		{"peer late", record(4, 1024), false, "rank 1 (call 4: one_shot of 1024 bfloat16 sum) did not arrive in this rank's call 5"},
		{"same call number, other count", record(5, 2048), true, "rank 0 sees ranks [1] differ from its own call"},
		{"peer at a later call", record(6, 1024), false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			put(0, record(5, 1024))
			put(1, tc.peer)
			got := c.nameLate(waited)
			require.ErrorIs(t, got, waited, "the wait's own error stays in the chain")
			require.Equal(t, tc.mismatch, errors.Is(got, ErrMismatch), "%v", got)
			if tc.contains == "" {
				require.Equal(t, waited, got)
				return
			}
			require.ErrorContains(t, got, tc.contains)
		})
	}
}
