package cpu

import (
	"sync/atomic"

	"github.com/intranode/intranode/kernels"
)

// pipeline is kernels.Pipeline as a grid of one block (channel 0): chunks
// of kernels.PipelineChunk(n, world, 1) bytes, chunk j in slot j mod
// kernels.PipelineSlots of the peers' push areas (all in half s, or over
// kernels.PipelineWideBytes half of them in each half). Chunk m is written
// (and signalled) once every peer's signal m-1 is in, which a peer sends
// only after reducing the chunk that held the slot before; the rank keeps
// up to PipelineSlots-1 chunks ahead of the one it reduces. A wide call
// whose last chunks touch the other half ends with one more exchange.
// Input chunk j is read before output chunk j is written, so input and
// output may be the same memory.
func (k *allReduce) pipeline() error {
	const slots = kernels.PipelineSlots
	me := k.me
	epochWord := word(k.pads[me], kernels.EpochWord)
	epoch := atomic.LoadUint32(epochWord)
	s := int(epoch & 1)
	atomic.StoreUint32(epochWord, epoch+1)
	chunk := kernels.PipelineChunk(k.n, k.world, 1)
	wide := k.n > kernels.PipelineWideBytes
	steps := (k.n + chunk - 1) / chunk
	peers := func(f func(p int)) {
		for p := range k.world {
			if p != me && k.mask&(1<<p) != 0 {
				f(p)
			}
		}
	}
	// need is the last of a peer's signals (numbered from 0, one per
	// chunk it writes) that must be in before chunk m is written.
	need := func(m int) int {
		switch {
		case m >= slots:
			return m - 1
		case wide && m >= slots/2:
			return 0
		}
		return -1
	}
	next, got := 0, -1 // the next chunk to write; the signals in so far
	write := func() {
		lo := next * chunk
		hi := min(lo+chunk, k.n)
		peers(func(p int) {
			dst := k.pads[p][kernels.PipelineSlot(k.n, k.world, s, me, p, 0, 1, next%slots):]
			copy(dst[:hi-lo], k.in[lo:hi])
			// The last chunk is padded with zeros to 16 bytes.
			clear(dst[hi-lo : (hi-lo+15)&^15])
		})
		peers(func(p int) { k.put(p, allReduceChannel) })
		next++
	}
	receiveTo := func(want int) (bool, error) {
		for ; got < want; got++ {
			for p := range k.world {
				if p == me || k.mask&(1<<p) == 0 {
					continue
				}
				if ok, err := k.wait(p, allReduceChannel); !ok {
					return false, err
				}
			}
		}
		return true, nil
	}
	for next < steps && next <= slots-2 && need(next) < 0 {
		write()
	}
	srcs := make([][]byte, k.world)
	for j := range steps {
		if ok, err := receiveTo(j); !ok {
			return err
		}
		for next < steps && next <= slots-2 && need(next) <= got {
			write()
		}
		lo := j * chunk
		hi := min(lo+chunk, k.n)
		for q := range k.world {
			if q == me {
				srcs[q] = k.in[lo:hi]
				continue
			}
			off := kernels.PipelineSlot(k.n, k.world, s, q, me, 0, 1, j%slots)
			srcs[q] = k.pads[me][off : off+hi-lo]
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
		// Only now may the chunk that takes chunk j's slot go out.
		for next < steps && next <= j+slots-1 {
			if ok, err := receiveTo(need(next)); !ok {
				return err
			}
			write()
		}
	}
	// The closing exchange: a peer's last signal certifies only the chunks
	// up to steps-slots as reduced; one of the later ones in the other half
	// would meet the next call's push path there.
	closing := false
	for m := steps - 1; wide && m >= 0 && m > steps-slots; m-- {
		closing = closing || m%slots >= slots/2
	}
	if closing {
		if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
			return err
		}
	}
	return nil
}
