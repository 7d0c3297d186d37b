package cpu

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// TestMoversPushBackToBack runs every data-movement kernel on its push
// path four times back to back, at worlds where each rank sends each
// peer different data, so that both directions of the push slots
// (launch.pushSlots) carry every pair's data, and checks each output
// exactly.
func TestMoversPushBackToBack(t *testing.T) {
	d := backend.Int32
	for _, world := range []int{2, 3, 4} {
		count := kernels.OneShotLLMax(world)/4 + 5
		n := count * 4
		require.Equal(t, "push", kernels.MoverPath(n, world))
		g := newGroup(world, world*int(kernels.MoverPart(uint64(count), 4)))
		// value is element i of block b of rank r's input in call c.
		value := func(c, r, b, i int) uint32 { return uint32(c*100000 + r*10000 + b*1000 + i%997) }
		block := func(c, r, b int, sum bool) []byte {
			out := make([]byte, n)
			for i := range count {
				v := value(c, r, b, i)
				if sum {
					v = 0
					for q := range world {
						v += value(c, q, b, i)
					}
				}
				binary.LittleEndian.PutUint32(out[4*i:], v)
			}
			return out
		}
		for _, algo := range kernels.Movers {
			t.Run(fmt.Sprintf("%s/world%d", algo, world), func(t *testing.T) {
				fn := Mover(algo, d)
				const root = 1
				for c := range 4 {
					for r := range world {
						for b := range world {
							copy(g.inBytes[r][b*n:], block(c, r, b, false))
						}
					}
					errs := runRanks(allRanks(world), func(r int) error {
						a := g.allReduceArgs(r, g.in[r], g.out[r], count, d, backend.Sum)
						if algo == kernels.Broadcast {
							a.Extra = root
						}
						return fn(testCtx(t), g.mem, backend.LaunchConfig{}, a.Args())
					})
					g.requireClean(t, errs, fmt.Sprintf("call %d", c))
					for me := range world {
						var want []byte
						switch algo {
						case kernels.ReduceScatter:
							want = block(c, 0, me, true)
						case kernels.Broadcast:
							want = block(c, root, 0, false)
						case kernels.AllGather:
							for r := range world {
								want = append(want, block(c, r, 0, false)...)
							}
						case kernels.AllToAll:
							for r := range world {
								want = append(want, block(c, r, me, false)...)
							}
						}
						require.Equal(t, want, g.outBytes[me][:len(want)], "call %d rank %d", c, me)
					}
				}
			})
		}
	}
}
