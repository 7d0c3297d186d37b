package cpu

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteLines checks both ways send stores LL lines (every second half
// atomic, as under the race detector, or only the last) against the
// format: each line's halves carry the flag in their top 32 bits and
// payload bytes [8j, 8j+8) in their low 32 bits, zero past the data, for
// lengths on and off the 16-byte padding.
func TestWriteLines(t *testing.T) {
	const f = 0x80a5f00d
	for _, n := range []int{1, 7, 8, 15, 16, 17, 100, 4096} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + 1)
		}
		padded := (n + 15) &^ 15
		for _, atomicHalves := range []bool{true, false} {
			t.Run(fmt.Sprintf("n=%d/atomic=%v", n, atomicHalves), func(t *testing.T) {
				lines := make([]uint64, padded/4)
				for i := range lines {
					lines[i] = 0xdeadbeefdeadbeef
				}
				writeLines(lines, data, f, atomicHalves)
				got := make([]byte, padded)
				for j := range padded / 8 {
					w0, w1 := lines[2*j], lines[2*j+1]
					require.Equal(t, uint32(f), uint32(w0>>32), "line %d first half", j)
					require.Equal(t, uint32(f), uint32(w1>>32), "line %d second half", j)
					for b := range 4 {
						got[8*j+b] = byte(w0 >> (8 * b))
						got[8*j+4+b] = byte(w1 >> (8 * b))
					}
				}
				require.Equal(t, data, got[:n])
				require.Equal(t, make([]byte, padded-n), got[n:], "padding")
			})
		}
	}
}
