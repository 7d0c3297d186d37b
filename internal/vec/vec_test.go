package vec_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/vec"
)

// The conversions and reductions are held to internal/numeric's scalar
// functions by that package's tests; these check the LL line loops
// against the line format itself.

const flag = uint64(0x80a5f00d) << 32

func words(n int) []uint64 {
	w := make([]uint64, n)
	for i := range w {
		w[i] = uint64(i+1)*0x9e3779b97f4a7c15 ^ 0xffffffff00000000
	}
	return w
}

func TestToLines(t *testing.T) {
	for _, n := range []int{0, 3, 4, 5, 64, 1001} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := words(n)
			lines := make([]uint64, 2*n)
			k := vec.ToLines(lines, w, flag)
			if !vec.Available() {
				require.Zero(t, k)
				return
			}
			require.Equal(t, n&^3, k)
			for j := range k {
				require.Equal(t, w[j]&0xffffffff|flag, lines[2*j], "word %d, bottom half", j)
				require.Equal(t, w[j]>>32|flag, lines[2*j+1], "word %d, top half", j)
			}
			for j := 2 * k; j < len(lines); j++ {
				require.Zero(t, lines[j], "line word %d is past the prefix", j)
			}
		})
	}
}

func TestFromLines(t *testing.T) {
	const n = 64
	w := words(n)
	lines := make([]uint64, 2*n)
	for j, x := range w {
		lines[2*j], lines[2*j+1] = x&0xffffffff|flag, x>>32|flag
	}
	got := make([]uint64, n)
	k, ok := vec.FromLines(got, lines, flag)
	require.True(t, ok)
	if !vec.Available() {
		require.Zero(t, k)
		return
	}
	require.Equal(t, n, k)
	require.Equal(t, w, got)
	// A wrong flag in any line word, in either half of its top 32 bits,
	// fails the check.
	for _, j := range []int{0, 1, 7, 8, 63, 64, 127} {
		for _, bad := range []uint64{flag ^ 1<<32, flag ^ 1<<63, 0} {
			saved := lines[j]
			lines[j] = lines[j]&0xffffffff | bad
			_, ok := vec.FromLines(got, lines, flag)
			require.False(t, ok, "line word %d with top half %#x", j, bad>>32)
			lines[j] = saved
		}
	}
}
