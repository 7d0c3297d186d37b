package cpu

import "github.com/intranode/intranode/kernels"

// pipeline is kernels.Pipeline as a grid of one block (channel 0): chunks
// of kernels.PipelineChunk(n, world, 1) bytes in chunk slot j mod 2 (both
// in half s, or over kernels.PipelineWideBytes one in each half) of the
// peers' push areas. Push and signal chunk 0; then for each chunk j: wait
// for every peer's chunk j, write chunk j+1 into the peers' pads, reduce
// chunk j from this rank's pad in rank order, signal chunk j+1; a wide call
// whose last chunk lies in the other half ends with one more exchange.
// Input chunk j is read a step before output chunk j is written, so input
// and output may be the same memory.
func (k *allReduce) pipeline() error {
	if kernels.PipelineScatters(k.world) {
		return k.pipelineScattered()
	}
	me := k.me
	s := int(k.takeEpoch() & 1)
	chunk := kernels.PipelineChunk(k.n, k.world, 1)
	push := func(j int) {
		lo := j * chunk
		hi := min(lo+chunk, k.n)
		k.eachPeer(k.mask, func(p int) {
			dst := k.pads[p][kernels.PipelineSlot(k.n, k.world, s, me, p, 0, 1, j%2):]
			cachedCopy(dst[:hi-lo], k.in[lo:hi])
			// The last chunk is padded with zeros to 16 bytes.
			clear(dst[hi-lo : (hi-lo+15)&^15])
		})
	}
	steps := (k.n + chunk - 1) / chunk
	if steps > 0 {
		push(0)
		k.post(allReduceChannel, k.mask)
	}
	srcs := make([][]byte, k.world)
	for j := range steps {
		if ok, err := k.receive(allReduceChannel, k.mask); !ok {
			return err
		}
		if j+1 < steps {
			push(j + 1)
		}
		lo := j * chunk
		hi := min(lo+chunk, k.n)
		for q := range k.world {
			if q == me {
				srcs[q] = k.in[lo:hi]
				continue
			}
			off := kernels.PipelineSlot(k.n, k.world, s, q, me, 0, 1, j%2)
			srcs[q] = k.pads[me][off : off+hi-lo]
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
		if j+1 < steps {
			// Only now: the signal tells the peers that chunk j's slot is free.
			k.post(allReduceChannel, k.mask)
		}
	}
	if k.n > kernels.PipelineWideBytes && steps%2 == 0 {
		// The closing exchange: one more signal and wait each way.
		if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
			return err
		}
	}
	return nil
}

// pipelineScattered is the scattered Pipeline (kernels.PipelineScatters)
// as a grid of one block: chunks of World slices of kernels.PipelineSlice
// bytes, slice r of each reduced by rank r. Scatter chunk 0 and signal;
// then for each chunk j: wait for every peer, copy the peers' results for
// chunk j-1 out of the all-gather slots, scatter chunk j+1, reduce this
// rank's slice of chunk j and write it into every peer's all-gather slot,
// signal; at the end wait once more and copy the last results out.
func (k *allReduce) pipelineScattered() error {
	me, world := k.me, k.world
	s := int(k.takeEpoch() & 1)
	q := kernels.PipelineSlice(world, 1)
	chunk := world * q
	// slice is the byte range of rank r's slice of chunk j, cut to the
	// message (empty past its end).
	slice := func(j, r int) (lo, hi int) {
		lo = min(j*chunk+r*q, k.n)
		return lo, min(lo+q, k.n)
	}
	// put writes b into slot k of my region in p's pad, zero-padded to 16.
	put := func(p, slot int, b []byte) {
		dst := k.pads[p][kernels.PipelineScatterSlot(world, s, me, p, 0, 1, slot):]
		cachedCopy(dst, b)
		clear(dst[len(b) : (len(b)+15)&^15])
	}
	scatter := func(j int) {
		k.eachPeer(k.mask, func(p int) {
			lo, hi := slice(j, p)
			put(p, j%2, k.in[lo:hi])
		})
	}
	gather := func(j int) {
		k.eachPeer(k.mask, func(p int) {
			lo, hi := slice(j, p)
			off := kernels.PipelineScatterSlot(world, s, p, me, 0, 1, 2+j%2)
			cachedCopy(k.out[lo:hi], k.pads[me][off:off+hi-lo])
		})
	}
	steps := (k.n + chunk - 1) / chunk
	if steps == 0 {
		return nil
	}
	scatter(0)
	k.post(allReduceChannel, k.mask)
	srcs := make([][]byte, world)
	for j := range steps {
		if ok, err := k.receive(allReduceChannel, k.mask); !ok {
			return err
		}
		if j > 0 {
			gather(j - 1)
		}
		if j+1 < steps {
			scatter(j + 1)
		}
		lo, hi := slice(j, me)
		for r := range world {
			if r == me {
				srcs[r] = k.in[lo:hi]
				continue
			}
			off := kernels.PipelineScatterSlot(world, s, r, me, 0, 1, j%2)
			srcs[r] = k.pads[me][off : off+hi-lo]
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
		k.eachPeer(k.mask, func(p int) { put(p, 2+j%2, k.out[lo:hi]) })
		k.post(allReduceChannel, k.mask)
	}
	if ok, err := k.receive(allReduceChannel, k.mask); !ok {
		return err
	}
	gather(steps - 1)
	return nil
}
