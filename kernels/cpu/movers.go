package cpu

import (
	"context"
	"sync/atomic"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// Mover returns the kernel kernels.KernelName(algo, dtype) of a
// data-movement collective (kernels.Movers): reduce-scatter, all-gather,
// broadcast or all-to-all, as package kernels documents them (copy into
// this rank's buffer, barrier, read the peers' buffers, barrier). It runs
// as one block on channel 0, like the all-reduce kernels.
func Mover(algo kernels.Algo, dtype backend.DType) Func {
	return collectiveKernel(algo, dtype, setupMover)
}

// mover is one resolved data-movement launch. Block r of the input or
// output is the n bytes at r*stride, part r of a buffer the n bytes at
// r*part.
type mover struct {
	*launch
	algo            kernels.Algo
	a               kernels.AllReduceArgs
	world, root     int
	n, stride, part int  // bytes
	pipelined       bool // kernels.MoverPipeline
	synced          bool // kernels.MoverSync
	bufs            [][]byte
	in, out         []byte
}

// layout returns, for a data-movement collective over world ranks with
// blocks of n bytes in buffer parts of p bytes, the bytes of a rank's
// buffer it uses and whether its input and output hold one block per rank
// (strided) or one.
func layout(algo kernels.Algo, world, n, p int) (span int, blockedIn, blockedOut bool) {
	switch algo {
	case kernels.ReduceScatter:
		return world * p, true, false
	case kernels.AllGather:
		return n, false, true
	case kernels.AllToAll:
		return world * p, true, true
	}
	return n, false, false
}

func setupMover(ctx context.Context, mem Memory, a kernels.AllReduceArgs, algo kernels.Algo,
	dtype backend.DType, name string) (*mover, error) {
	l, err := openCollective(ctx, mem, a, dtype, name)
	if err != nil {
		return nil, err
	}
	size := dtype.Size()
	k := &mover{launch: l, algo: algo, a: a, world: int(a.World), n: int(a.Count) * size}
	k.stride, k.part = k.n, int(kernels.MoverPart(a.Count, size))
	k.pipelined = a.Extra&kernels.MoverPipeline != 0
	k.synced = a.Extra&kernels.MoverSync != 0
	extra := a.Extra &^ kernels.MoverModes
	switch {
	case k.synced && algo == kernels.ReduceScatter:
		return nil, l.badArgs("the copy path's agreement (MoverSync) is not a reduce-scatter's")
	case algo == kernels.Broadcast:
		if extra >= uint64(a.World) {
			return nil, l.badArgs("broadcast root %d out of range [0,%d)", extra, a.World)
		}
		k.root = int(extra)
	case extra != 0:
		if extra < a.Count || extra > uint64(1<<40) {
			return nil, l.badArgs("block stride %d must be at least the count %d (and at most 2^40)", extra, a.Count)
		}
		k.stride = int(extra) * size
	}
	span, blockedIn, blockedOut := layout(algo, k.world, k.n, k.part)
	if k.pipelined || k.synced {
		span = 0 // the pipelined path and the agreement use no buffer
	}
	if k.bufs, err = l.resolveAligned(mem, a, span, k.n, size); err != nil {
		return nil, err
	}
	if k.n == 0 {
		return k, nil
	}
	extent := func(blocked bool) int {
		if blocked {
			return (k.world-1)*k.stride + k.n
		}
		return k.n
	}
	// The broadcast's input is read on the root only.
	if algo != kernels.Broadcast || k.root == k.me {
		if k.in, err = mem.Bytes(a.Input, extent(blockedIn)); err != nil {
			return nil, l.badArgsWrap(err, "input %#x, %d bytes", uint64(a.Input), extent(blockedIn))
		}
	}
	if k.out, err = mem.Bytes(a.Output, extent(blockedOut)); err != nil {
		return nil, l.badArgsWrap(err, "output %#x, %d bytes", uint64(a.Output), extent(blockedOut))
	}
	for r, b := range k.bufs {
		if overlaps(k.out, b) {
			return nil, l.badArgs("output %#x overlaps the symmetric buffer of rank %d", uint64(a.Output), r)
		}
	}
	return k, nil
}

// block returns block r (n bytes at r*stride) of a blocked input or output.
func (k *mover) block(b []byte, r int) []byte { return b[r*k.stride : r*k.stride+k.n] }

// partOf returns part r of a buffer: n bytes at r*part.
func (k *mover) partOf(b []byte, r int) []byte { return b[r*k.part : r*k.part+k.n] }

// copyIn is step 1: what the peers need, into this rank's own buffer.
func (k *mover) copyIn() {
	own := k.bufs[k.me]
	put := func(dst, src []byte) {
		if !same(dst, src) {
			cachedCopy(dst, src)
		}
	}
	switch k.algo {
	case kernels.ReduceScatter, kernels.AllToAll:
		for r := range k.world {
			put(k.partOf(own, r), k.block(k.in, r))
		}
	case kernels.AllGather:
		put(own[:k.n], k.in)
	case kernels.Broadcast:
		if k.me == k.root {
			put(own[:k.n], k.in)
		}
	}
}

// gather is step 3: the output from the buffers.
func (k *mover) gather() {
	switch k.algo {
	case kernels.ReduceScatter:
		srcs := make([][]byte, k.world)
		for r, b := range k.bufs {
			srcs[r] = k.partOf(b, k.me)
		}
		reduce(k.a.DType, k.a.Op, k.out, srcs)
	case kernels.AllGather:
		for r, b := range k.bufs {
			cachedCopy(k.block(k.out, r), b[:k.n])
		}
	case kernels.Broadcast:
		cachedCopy(k.out, k.bufs[k.root][:k.n])
	case kernels.AllToAll:
		for r, b := range k.bufs {
			cachedCopy(k.block(k.out, r), k.partOf(b, k.me))
		}
	}
}

func (k *mover) run() error {
	// The copy path's agreement after a failure (the agreement before it
	// timed out or found a mismatch) neither signals, so that its peers
	// fail too rather than pass on what this rank may no longer hold, nor
	// publishes its Call: a peer still in the call before would find it
	// in its slot (same parity) and take it for a different call.
	if k.synced && k.status != nil && atomic.LoadUint32(word(k.status, 0)) != 0 {
		return nil
	}
	k.publish(k.world, kernels.Record{Call: k.call, Count: k.a.Count, Info: kernels.LaunchInfo(k.algo, k.a.DType, k.a.Op, k.a.Extra)})
	mask := uint32(1)<<k.world - 1
	switch {
	case k.synced:
		_, err := k.barrier(allReduceChannel, mask)
		return err
	case k.pipelined:
		return k.pipeline()
	}
	switch kernels.MoverPath(k.n, k.world) {
	case "ll":
		return k.ll()
	case "push":
		return k.push()
	}
	if k.n > 0 {
		k.copyIn()
	}
	if ok, err := k.barrier(allReduceChannel, mask); !ok {
		return err
	}
	if k.n > 0 {
		k.gather()
	}
	_, err := k.barrier(allReduceChannel, mask)
	return err
}

// contribution is what this rank sends rank r on the LL and push paths:
// its input block r (reduce-scatter, all-to-all) or its input.
func (k *mover) contribution(r int) []byte {
	if k.algo == kernels.ReduceScatter || k.algo == kernels.AllToAll {
		return k.block(k.in, r)
	}
	return k.in[:k.n]
}

// emit writes the output on the LL, push and pipelined paths from
// part(r), what rank r sent this rank (this rank's own contribution for r
// == me): bytes [lo, hi) of every output block, part(r) holding as many.
func (k *mover) emit(lo, hi int, part func(r int) []byte) {
	switch k.algo {
	case kernels.ReduceScatter:
		srcs := make([][]byte, k.world)
		for r := range k.world {
			srcs[r] = part(r)
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
	case kernels.Broadcast:
		cachedCopy(k.out[lo:hi], part(k.root))
	default:
		for r := range k.world {
			cachedCopy(k.block(k.out, r)[lo:hi], part(r))
		}
	}
}

// pipeline is the pipelined path (kernels.MoverPipeline) as a grid of one
// block (channel 0): the Pipeline's schedule (pipelineSteps) with chunks
// of kernels.MoverPipelineChunk bytes of what each peer needs, and the
// output of each chunk written as emit writes it.
func (k *mover) pipeline() error {
	me, world := k.me, k.world
	if k.algo == kernels.Broadcast && kernels.BroadcastRelays(world) {
		return k.relay()
	}
	mask := uint32(1)<<world - 1
	s := int(k.takeEpoch() & 1)
	chunk := kernels.MoverPipelineChunk(k.n, world, 1)
	if chunk == 0 {
		return k.badArgs("a pipelined launch of %d bytes per block has no room in the push area at world %d", k.n, world)
	}
	sends := k.algo != kernels.Broadcast || me == k.root
	return k.pipelineSteps(k.n, chunk, mask, func(j, lo, hi int) {
		if sends {
			k.eachPeer(mask, func(p int) {
				putChunk(k.pads[p][kernels.PipelineSlot(k.n, world, s, me, p, 0, 1, j%2):], k.contribution(p)[lo:hi])
			})
		}
	}, func(j, lo, hi int) {
		k.emit(lo, hi, func(r int) []byte {
			if r == me {
				return k.contribution(me)[lo:hi]
			}
			off := kernels.PipelineSlot(k.n, world, s, r, me, 0, 1, j%2)
			return k.pads[me][off : off+hi-lo]
		})
	})
}

// relay is the relayed broadcast (kernels.BroadcastRelays) as a grid of
// one block: chunks of World-1 slices of kernels.PipelineSlice bytes, the
// o-th slice of each owned by the o-th rank other than the root. The root
// scatters each chunk's slices to their owners and copies its input to
// its output; every other rank copies its slice from the root's slot into
// its output and into the all-gather slot of every other rank but the
// root, and gathers theirs (scatteredSteps).
func (k *mover) relay() error {
	world, root := k.world, k.root
	mask := uint32(1)<<world - 1
	others := mask &^ (1 << root)
	s := int(k.takeEpoch() & 1)
	q := kernels.PipelineSlice(world, 1)
	chunk := kernels.RelayChunk(world, 1)
	if q == 0 {
		return k.badArgs("a relayed broadcast has no room in the push area at world %d", world)
	}
	// slice is the byte range of rank r's slice of chunk j (r is not the
	// root), cut to the message.
	slice := func(j, r int) (lo, hi int) {
		if r > root {
			r--
		}
		lo = min(j*chunk+r*q, k.n)
		return lo, min(lo+q, k.n)
	}
	scatter, own := func(int) {}, func(j int) {
		lo, hi := slice(j, k.me)
		cachedCopy(k.out[lo:hi], k.slot(s, root, j%2, hi-lo))
		k.eachPeer(others, func(p int) { k.putSlot(s, p, 2+j%2, k.out[lo:hi]) })
	}
	from := others
	if k.me == root {
		from = 0
		scatter = func(j int) {
			k.eachPeer(mask, func(p int) {
				lo, hi := slice(j, p)
				k.putSlot(s, p, j%2, k.in[lo:hi])
			})
		}
		own = func(j int) {
			lo, hi := j*chunk, min(j*chunk+chunk, k.n)
			cachedCopy(k.out[lo:hi], k.in[lo:hi])
		}
	}
	return k.scatteredSteps(s, (k.n+chunk-1)/chunk, mask, from, slice, scatter, own, k.out)
}

// ll is the LL path (kernels.MoverPath): what each peer needs, as LL
// lines into the peer's LL slot; the output from the lines of this rank's
// own pad and its input. No barrier; the epoch picks the slot and the
// flag. In a broadcast every rank but the root sends every peer a token
// instead (one 16-byte vector of zeros), so that every rank hears from
// every peer in every call, as the epoch argument requires.
func (k *mover) ll() error {
	me := k.me
	bcast := k.algo == kernels.Broadcast
	c := k.openLL()
	var token [16]byte
	for p := range k.world {
		switch {
		case p == me:
		case !bcast || me == k.root:
			c.send(p, k.contribution(p))
		default:
			c.send(p, token[:])
		}
	}
	parts := make([][]byte, k.world)
	for q := range k.world {
		var err error
		ok := true
		switch {
		case q == me:
			if !bcast || me == k.root {
				parts[q] = k.contribution(me)
			}
		case !bcast || q == k.root:
			parts[q], ok, err = c.receive(q, k.n)
		default:
			_, ok, err = c.receive(q, len(token))
		}
		if !ok {
			return err
		}
	}
	k.emit(0, k.n, func(r int) []byte { return parts[r] })
	return nil
}

// push is the push path (kernels.MoverPath): what each peer needs, into
// the slot that carries it to that peer; one barrier; the output from the
// slots that carry the peers' data to this rank, and its own input.
// openPush picks the slots.
func (k *mover) push() error {
	me := k.me
	mask := uint32(1)<<k.world - 1
	slot, large, ok, err := k.openPush(k.n, mask)
	if !ok {
		return err
	}
	for p := range k.world {
		if p == me || (k.algo == kernels.Broadcast && me != k.root) {
			continue
		}
		cachedCopy(slot(me, p)[:k.n], k.contribution(p))
	}
	if ok, err := k.barrier(allReduceChannel, mask); !ok {
		return err
	}
	k.emit(0, k.n, func(r int) []byte {
		if r == me {
			return k.contribution(me)
		}
		return slot(r, me)[:k.n]
	})
	return k.closePush(large, mask)
}
