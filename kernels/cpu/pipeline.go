package cpu

import (
	"sync/atomic"

	"github.com/intranode/intranode/kernels"
)

// pipeline is kernels.Pipeline as a grid of one block: chunks of
// kernels.PipelineChunk(world, 1) bytes, each pushed into every peer's pad
// (chunk slot j mod 2 of half s of the push area), then a barrier on
// channel 0, then reduced from this rank's pad in rank order. The input
// chunk is read before the barrier and the output chunk written after it,
// so input and output may be the same memory.
func (k *allReduce) pipeline() error {
	me := k.me
	epochWord := word(k.pads[me], kernels.EpochWord)
	epoch := atomic.LoadUint32(epochWord)
	s := int(epoch & 1)
	atomic.StoreUint32(epochWord, epoch+1)
	chunk := kernels.PipelineChunk(k.world, 1)
	srcs := make([][]byte, k.world)
	for j, lo := 0, 0; lo < k.n; j, lo = j+1, lo+chunk {
		hi := min(lo+chunk, k.n)
		slot := j % 2
		for p := range k.world {
			if p == me {
				continue
			}
			dst := k.pads[p][kernels.PipelineSlot(k.world, s, me, p, 0, 1, slot):]
			copy(dst[:hi-lo], k.in[lo:hi])
			// The last chunk is padded with zeros to 16 bytes.
			clear(dst[hi-lo : (hi-lo+15)&^15])
		}
		if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
			return err
		}
		for q := range k.world {
			if q == me {
				srcs[q] = k.in[lo:hi]
				continue
			}
			off := kernels.PipelineSlot(k.world, s, q, me, 0, 1, slot)
			srcs[q] = k.pads[me][off : off+hi-lo]
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
	}
	return nil
}
