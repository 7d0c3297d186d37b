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
		value := func(call, r, block, i int) int32 { return int32(call*100000 + r*10000 + block*1000 + i%997) }
		for _, algo := range kernels.Movers {
			t.Run(fmt.Sprintf("%s/world%d", algo, world), func(t *testing.T) {
				fn := Mover(algo, d)
				const root = 1
				for call := range 4 {
					for r := range world {
						in := g.inBytes[r]
						for b := range world {
							for i := range count {
								binary.LittleEndian.PutUint32(in[(b*count+i)*4:], uint32(value(call, r, b, i)))
							}
						}
					}
					errs := runRanks(allRanks(world), func(r int) error {
						a := g.allReduceArgs(r, g.in[r], g.out[r], count, d, backend.Sum)
						if algo == kernels.Broadcast {
							a.Extra = root
						}
						return fn(testCtx(t), g.mem, backend.LaunchConfig{}, a.Args())
					})
					g.requireClean(t, errs, fmt.Sprintf("call %d", call))
					for me := range world {
						out := g.outBytes[me]
						for b := range world {
							if b > 0 && (algo == kernels.ReduceScatter || algo == kernels.Broadcast) {
								break
							}
							for i := range count {
								var want int32
								switch algo {
								case kernels.ReduceScatter:
									for r := range world {
										want += value(call, r, me, i)
									}
								case kernels.AllGather:
									want = value(call, b, 0, i)
								case kernels.Broadcast:
									want = value(call, root, 0, i)
								case kernels.AllToAll:
									want = value(call, b, me, i)
								}
								got := int32(binary.LittleEndian.Uint32(out[(b*count+i)*4:]))
								require.Equal(t, want, got, "call %d rank %d block %d element %d", call, me, b, i)
							}
						}
					}
				}
			})
		}
	}
}
