package ncclapi

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegistry: a handle's state is made once and found again by every
// look-up; formed finds only handles seen before.
func TestRegistry(t *testing.T) {
	const h = uintptr(0x5eed0001)
	t.Cleanup(func() { comms.Delete(h) })
	require.Nil(t, formed(h))
	st := stateOf(h)
	require.Same(t, st, stateOf(h))
	require.Same(t, st, formed(h))
}

// BenchmarkRegistry looks communicators up from every thread at once, as
// accelerated calls and the ncclCommGetAsyncError polls of a process with
// a thread per GPU do (nccl-tests -t N). Run with go test -run '^$'
// -bench Registry -cpu 1,2,4 ./ncclapi.
func BenchmarkRegistry(b *testing.B) {
	const n = 8
	for i := range n {
		stateOf(uintptr(0x5eed1000 + i))
		b.Cleanup(func() { comms.Delete(uintptr(0x5eed1000 + i)) })
	}
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		h := uintptr(0x5eed1000 + next.Add(1)%n)
		for pb.Next() {
			if stateOf(h) == nil {
				b.Fatal("no state")
			}
		}
	})
}
