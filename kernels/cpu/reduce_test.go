package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
)

// TestReduceAlignment reduces the same values from aligned and misaligned
// slices (typed views versus encoding/binary), across chunk boundaries and
// with the destination aliasing a source, and expects the same bits.
func TestReduceAlignment(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const count = 2*chunkElems + 37
	for _, d := range backend.DTypes {
		for _, op := range ops {
			t.Run(fmt.Sprintf("%v/%v", d, op), func(t *testing.T) {
				n := count * d.Size()
				srcs := make([][]byte, 5)
				for s := range srcs {
					srcs[s] = make([]byte, n)
					for i := range count {
						numeric.Put(d, srcs[s], i, rng.NormFloat64()*1000)
					}
				}
				want := make([]byte, n)
				reduce(d, op, want, srcs)

				// The same sources, each copied one byte into a buffer.
				shifted := make([][]byte, len(srcs))
				for s, src := range srcs {
					shifted[s] = append(make([]byte, 1, n+1), src...)[1:]
				}
				got := make([]byte, n+3)[3:]
				reduce(d, op, got, shifted)
				require.True(t, bytes.Equal(want, got), "misaligned sources and destination")

				// The destination is the third source.
				reduce(d, op, shifted[2], shifted)
				require.True(t, bytes.Equal(want, shifted[2]), "destination aliasing a source")

				for i := range count {
					acc := numeric.Get(d, srcs[0], i)
					for _, src := range srcs[1:] {
						acc = numeric.Combine(op, acc, numeric.Get(d, src, i))
						if d == backend.Float32 || d == backend.Float16 || d == backend.BFloat16 {
							acc = float64(float32(acc)) // float32 accumulation
						}
					}
					b := make([]byte, d.Size())
					numeric.Put(d, b, 0, acc)
					require.Equal(t, b, want[i*d.Size():(i+1)*d.Size()], "element %d", i)
				}
			})
		}
	}
}
