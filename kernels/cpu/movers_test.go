package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

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

// TestMoverSync: the copy path's agreement (kernels.MoverSync) is a
// barrier carrying the Call that touches no data. Calls that agree pass
// with outputs and buffers untouched; Calls that differ end in
// StatusMismatch on both ranks; a rank whose status word is already set
// neither signals (its peer times out naming it) nor publishes its Call
// into the peer's slot, where a peer still in an earlier call would take
// it for a different one; a reduce-scatter cannot be one.
func TestMoverSync(t *testing.T) {
	const count = 100
	d := backend.Float32
	tag := func(seq uint32, n int) uint64 {
		return kernels.CallTagOf(seq, kernels.LaunchInfo(kernels.AllGather, d, backend.Sum, kernels.MoverSync), uint64(n))
	}
	for _, tc := range []struct {
		name    string
		algo    kernels.Algo
		counts  [2]int
		preset  [2]uint32
		want    [2]int // status codes
		timeout time.Duration
	}{
		{"agree", kernels.AllGather, [2]int{count, count}, [2]uint32{}, [2]int{0, 0}, 20 * time.Second},
		{"differ", kernels.AllGather, [2]int{count, count + 1}, [2]uint32{},
			[2]int{kernels.StatusMismatch, kernels.StatusMismatch}, 20 * time.Second},
		{"failed before", kernels.AllGather, [2]int{count, count},
			[2]uint32{kernels.EncodeStatus(kernels.StatusTimeout, 1, 0), 0},
			[2]int{kernels.StatusTimeout, kernels.StatusTimeout}, 200 * time.Millisecond},
		{"reduce-scatter", kernels.ReduceScatter, [2]int{count, count}, [2]uint32{},
			[2]int{kernels.StatusBadArgs, kernels.StatusBadArgs}, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroup(2, 1<<16)
			for r := range 2 {
				for _, b := range [][]byte{g.bufBytes[r], g.outBytes[r]} {
					for i := range b {
						b[i] = 0x5a
					}
				}
				binary.LittleEndian.PutUint32(g.statBuf[r], tc.preset[r])
			}
			fn := Mover(tc.algo, d)
			runRanks(allRanks(2), func(r int) error {
				a := g.allReduceArgs(r, g.in[r], g.out[r], tc.counts[r], d, backend.Sum)
				a.Extra, a.Call, a.TimeoutNs = kernels.MoverSync, tag(7, tc.counts[r]), uint64(tc.timeout)
				return fn(testCtx(t), g.mem, backend.LaunchConfig{}, a.Args())
			})
			for r := range 2 {
				code, peer, _ := kernels.DecodeStatus(g.statusOf(r))
				require.Equal(t, tc.want[r], code, "rank %d's status", r)
				if code == kernels.StatusMismatch || code == kernels.StatusTimeout {
					require.Equal(t, 1-r, peer, "rank %d's status names its peer", r)
				}
				require.Equal(t, bytes.Repeat([]byte{0x5a}, len(g.outBytes[r])), g.outBytes[r], "rank %d's output", r)
				require.Equal(t, bytes.Repeat([]byte{0x5a}, len(g.bufBytes[r])), g.bufBytes[r], "rank %d's buffer", r)
				slot := binary.LittleEndian.Uint64(g.padBytes[1-r][kernels.CallInWord(r, 7&1):])
				published := tc.preset[r] == 0 && tc.want[r] != kernels.StatusBadArgs
				require.Equal(t, published, slot == tag(7, tc.counts[r]), "rank %d's Call in its peer's slot: %#x", r, slot)
			}
		})
	}
}
