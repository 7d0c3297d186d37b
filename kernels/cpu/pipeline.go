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
// bytes, slice r of each reduced by rank r and written into every peer's
// all-gather slot (scatteredSteps).
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
	srcs := make([][]byte, world)
	return k.scatteredSteps(s, (k.n+chunk-1)/chunk, k.mask, k.mask, slice,
		func(j int) {
			k.eachPeer(k.mask, func(p int) {
				lo, hi := slice(j, p)
				k.putSlot(s, p, j%2, k.in[lo:hi])
			})
		},
		func(j int) {
			lo, hi := slice(j, me)
			for r := range world {
				if r == me {
					srcs[r] = k.in[lo:hi]
					continue
				}
				srcs[r] = k.slot(s, r, j%2, hi-lo)
			}
			reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
			k.eachPeer(k.mask, func(p int) { k.putSlot(s, p, 2+j%2, k.out[lo:hi]) })
		}, k.out)
}

// putSlot writes b into slot i of this rank's region of the scattered
// Pipeline's slots (kernels.PipelineScatterSlot, epoch slot s) in p's
// pad, zero-padded to 16 bytes.
func (l *launch) putSlot(s, p, i int, b []byte) {
	putChunk(l.pads[p][kernels.PipelineScatterSlot(len(l.pads), s, l.me, p, 0, 1, i):], b)
}

// slot is the first n bytes of slot i of rank r's region of the scattered
// Pipeline's slots in this rank's pad.
func (l *launch) slot(s, r, i, n int) []byte {
	off := kernels.PipelineScatterSlot(len(l.pads), s, r, l.me, 0, 1, i)
	return l.pads[l.me][off : off+n]
}

// scatteredSteps runs the scattered Pipeline's schedule (kernels/abi.go,
// "Pipeline, scattered") over steps chunks as a grid of one block on
// channel 0, signalling the ranks of mask: scatter chunk 0 and signal;
// then for each chunk j: wait for every peer, gather j-1, scatter j+1,
// own j, signal; at the end wait once more and gather the last chunk.
// Gather j copies slice(j, p) of every peer p of from (those that write
// this rank's all-gather slots) out of p's all-gather slot j mod 2 into
// out. The relayed broadcast runs on it too.
func (l *launch) scatteredSteps(s, steps int, mask, from uint32, slice func(j, r int) (lo, hi int),
	scatter, own func(j int), out []byte) error {
	gather := func(j int) {
		l.eachPeer(from, func(p int) {
			lo, hi := slice(j, p)
			cachedCopy(out[lo:hi], l.slot(s, p, 2+j%2, hi-lo))
		})
	}
	if steps == 0 {
		return nil
	}
	scatter(0)
	l.post(allReduceChannel, mask)
	for j := range steps {
		if ok, err := l.receive(allReduceChannel, mask); !ok {
			return err
		}
		if j > 0 {
			gather(j - 1)
		}
		if j+1 < steps {
			scatter(j + 1)
		}
		own(j)
		l.post(allReduceChannel, mask)
	}
	if ok, err := l.receive(allReduceChannel, mask); !ok {
		return err
	}
	gather(steps - 1)
	return nil
}
