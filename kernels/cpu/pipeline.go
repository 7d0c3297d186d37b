package cpu

import "github.com/intranode/intranode/kernels"

// pipeline is kernels.Pipeline as a grid of one block (channel 0): chunks
// of kernels.PipelineChunk(n, world, 1) bytes, reduced in rank order from
// the slots of this rank's pad (pipelineSteps). Input chunk j is read a
// step before output chunk j is written, so input and output may be the
// same memory.
func (k *allReduce) pipeline() error {
	if kernels.PipelineScatters(k.world) {
		return k.pipelineScattered()
	}
	me := k.me
	s := int(k.takeEpoch() & 1)
	chunk := kernels.PipelineChunk(k.n, k.world, 1)
	srcs := make([][]byte, k.world)
	return k.pipelineSteps(k.n, chunk, k.mask, func(j, lo, hi int) {
		k.eachPeer(k.mask, func(p int) {
			putChunk(k.pads[p][kernels.PipelineSlot(k.n, k.world, s, me, p, 0, 1, j%2):], k.in[lo:hi])
		})
	}, func(j, lo, hi int) {
		for q := range k.world {
			if q == me {
				srcs[q] = k.in[lo:hi]
				continue
			}
			off := kernels.PipelineSlot(k.n, k.world, s, q, me, 0, 1, j%2)
			srcs[q] = k.pads[me][off : off+hi-lo]
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
	})
}

// putChunk writes b at the start of slot, zero-padded to 16 bytes (the
// last chunk of a message).
func putChunk(slot, b []byte) {
	cachedCopy(slot[:len(b)], b)
	clear(slot[len(b) : (len(b)+15)&^15])
}

// pipelineSteps runs the Pipeline's schedule (kernels/abi.go, "Pipeline")
// as a grid of one block on channel 0, for the all-reduce at world 2 and
// the data-movement collectives' pipelined path: n bytes in chunks of
// chunk bytes, chunk j in slot j mod 2. push(j, lo, hi) writes chunk j
// (bytes [lo, hi)) into the peers' slots, drain(j, lo, hi) writes its
// output. Push and signal chunk 0; then for each chunk j: wait for every
// peer of mask, push chunk j+1, drain chunk j, and only then signal chunk
// j+1, which also tells the peers that chunk j's slot is free; a wide call
// (over kernels.PipelineWideBytes) whose last chunk lies in the other half
// ends with one more exchange.
func (l *launch) pipelineSteps(n, chunk int, mask uint32, push, drain func(j, lo, hi int)) error {
	bounds := func(j int) (int, int) { return j * chunk, min(j*chunk+chunk, n) }
	steps := (n + chunk - 1) / chunk
	if steps > 0 {
		lo, hi := bounds(0)
		push(0, lo, hi)
		l.post(allReduceChannel, mask)
	}
	for j := range steps {
		if ok, err := l.receive(allReduceChannel, mask); !ok {
			return err
		}
		if j+1 < steps {
			lo, hi := bounds(j + 1)
			push(j+1, lo, hi)
		}
		lo, hi := bounds(j)
		drain(j, lo, hi)
		if j+1 < steps {
			l.post(allReduceChannel, mask)
		}
	}
	if n > kernels.PipelineWideBytes && steps%2 == 0 {
		if ok, err := l.barrier(allReduceChannel, mask); !ok {
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
		putChunk(k.pads[p][kernels.PipelineScatterSlot(world, s, me, p, 0, 1, slot):], b)
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
