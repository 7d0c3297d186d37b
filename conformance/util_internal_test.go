package conformance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostPool checks that the pool lends zeroed buffers of the asked
// length, lends a returned buffer again (the smallest that fits), and
// keeps no more than maxPooled; a nil pool lends new buffers and keeps none.
func TestHostPool(t *testing.T) {
	var p hostPool
	small, large := p.get(100), p.get(70_000)
	require.Len(t, small, 100)
	require.Len(t, large, 70_000)
	require.Equal(t, 1<<17, cap(large), "room to the next power of two")
	for i := range large {
		large[i] = 0xff
	}
	small[0] = 0xff
	p.put([][]byte{large, small})

	again := p.get(80_000)
	require.Same(t, &large[0], &again[0], "a kept buffer that fits is lent again")
	require.Len(t, again, 80_000)
	require.Equal(t, make([]byte, 80_000), again, "lent again zeroed")
	tiny := p.get(50)
	require.Same(t, &small[0], &tiny[0], "the smallest that fits")
	require.Equal(t, make([]byte, 50), tiny)
	require.Len(t, p.get(1), 1, "nothing left to lend: a new buffer")

	var many [][]byte
	for i := range maxPooled + 5 {
		many = append(many, make([]byte, 10+i))
	}
	p.put(many)
	require.Len(t, p.free, maxPooled)
	require.Equal(t, 10+maxPooled+4, cap(p.free[0]), "the largest are kept")

	var none *hostPool
	require.Equal(t, make([]byte, 5), none.get(5))
	none.put([][]byte{make([]byte, 5)})
}
