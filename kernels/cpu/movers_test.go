package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// TestMoversPushBackToBack runs every data-movement kernel on its push
// path four times back to back, each rank making its four calls without
// waiting for the others, at worlds where each rank sends each peer
// different data, so that both directions of the push slots
// (launch.pushSlots) carry every pair's data, and checks each output
// exactly; at world 2 also with blocks over PushSplitBytes, which keep to
// slot 0 between barriers (launch.openPush), alone and between small
// calls: under the race detector a call that writes a slot before its
// peer has read the last one fails.
func TestMoversPushBackToBack(t *testing.T) {
	d := backend.Int32
	const calls = 4
	type sequence struct {
		name   string
		world  int
		counts [calls]int // by call
	}
	var seqs []sequence
	for _, world := range []int{2, 3, 4} {
		c := kernels.OneShotLLMax(world)/4 + 5
		seqs = append(seqs, sequence{"small", world, [calls]int{c, c, c, c}})
	}
	small, large := kernels.OneShotLLMax(2)/4+5, kernels.PushSplitBytes/4+5
	seqs = append(seqs, sequence{"large", 2, [calls]int{large, large, large, large}},
		sequence{"mixed", 2, [calls]int{small, large, small, large}})
	for _, seq := range seqs {
		world := seq.world
		top := slices.Max(seq.counts[:])
		for _, count := range seq.counts {
			require.Equal(t, "push", kernels.MoverPath(count*4, world))
		}
		g := newGroup(world, world*int(kernels.MoverPart(uint64(top), 4)))
		// value is element i of block b of rank r's input in call c.
		value := func(c, r, b, i int) uint32 { return uint32(c*100000 + r*10000 + b*1000 + i%997) }
		block := func(c, r, b int, sum bool) []byte {
			count := seq.counts[c]
			out := make([]byte, 4*count)
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
		// Every call's input and output, by call and rank, allocated
		// before any kernel runs.
		var ins, outs [calls][]backend.DevicePtr
		var outBytes [calls][][]byte
		for c := range calls {
			for r := range world {
				n := 4 * seq.counts[c]
				p, b := g.mem.alloc(world * n)
				for blk := range world {
					copy(b[blk*n:], block(c, r, blk, false))
				}
				ins[c] = append(ins[c], p)
				p, b = g.mem.alloc(world * n)
				outs[c], outBytes[c] = append(outs[c], p), append(outBytes[c], b)
			}
		}
		for _, algo := range kernels.Movers {
			t.Run(fmt.Sprintf("%s/world%d/%s", algo, world, seq.name), func(t *testing.T) {
				fn := Mover(algo, d)
				const root = 1
				errs := runRanks(allRanks(world), func(r int) error {
					for c := range calls {
						a := g.allReduceArgs(r, ins[c][r], outs[c][r], seq.counts[c], d, backend.Sum)
						if algo == kernels.Broadcast {
							a.Extra = root
						}
						if err := fn(testCtx(t), g.mem, backend.LaunchConfig{}, a.Args()); err != nil {
							return fmt.Errorf("call %d: %w", c, err)
						}
					}
					return nil
				})
				g.requireClean(t, errs, "four calls")
				for c := range calls {
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
						require.Equal(t, want, outBytes[c][me][:len(want)], "call %d rank %d", c, me)
					}
				}
			})
		}
	}
}

// TestRelayedBroadcast runs the pipelined broadcast where it is relayed
// (kernels.BroadcastRelays) twice in a row, out of place and in place,
// over several chunks, the last one partial, with the root first, in the
// middle and last: every rank's output must be the root's input.
func TestRelayedBroadcast(t *testing.T) {
	const d = backend.Float32
	for _, world := range []int{3, 4, 5, 8} {
		chunk := kernels.RelayChunk(world, 1)
		require.True(t, kernels.BroadcastRelays(world))
		require.Positive(t, chunk)
		for _, root := range []int{0, world / 2, world - 1} {
			for _, inPlace := range []bool{false, true} {
				// Two and a half chunks and one element more: a partial last
				// chunk whose last slice is short and whose later slices are
				// empty.
				count := (5*chunk/2)/4 + 1
				n := 4 * count
				t.Run(fmt.Sprintf("world%d/root%d/inplace=%v", world, root, inPlace), func(t *testing.T) {
					g := newGroup(world, 64)
					value := func(c, r, i int) uint32 { return uint32(c<<28 | r<<24 | i) }
					ins := make([]backend.DevicePtr, world)
					outs := make([]backend.DevicePtr, world)
					outBytes := make([][]byte, world)
					const calls = 2
					run := func(c int) map[int]error {
						for r := range world {
							p, b := g.mem.alloc(n)
							for i := range count {
								binary.LittleEndian.PutUint32(b[4*i:], value(c, r, i))
							}
							ins[r], outs[r], outBytes[r] = p, p, b
							if !inPlace {
								outs[r], outBytes[r] = g.mem.alloc(n)
							}
						}
						return runRanks(allRanks(world), func(r int) error {
							a := g.allReduceArgs(r, ins[r], outs[r], count, d, backend.Sum)
							a.Extra = uint64(root) | kernels.MoverPipeline
							return Mover(kernels.Broadcast, d)(testCtx(t), g.mem, backend.LaunchConfig{}, a.Args())
						})
					}
					want := make([]byte, n)
					for c := range calls {
						g.requireClean(t, run(c), fmt.Sprintf("call %d", c))
						for i := range count {
							binary.LittleEndian.PutUint32(want[4*i:], value(c, root, i))
						}
						for r := range world {
							if !bytes.Equal(want, outBytes[r]) {
								i := 0
								for want[i] == outBytes[r][i] {
									i++
								}
								require.Failf(t, "wrong broadcast", "call %d rank %d: first wrong byte %d of %d", c, r, i, n)
							}
						}
					}
				})
			}
		}
	}
}
