package cpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// allReduceChannel is the channel the all-reduce kernels synchronise on:
// they run as a single block, block 0.
const allReduceChannel = 0

// AllReduce returns the kernel kernels.KernelName(algo, dtype)
// (AllReduceArgs). It checks that the arguments name the same dtype, a
// valid op, a world of 1 to kernels.MaxRanks (exactly 8 for HCM) and
// pointers that resolve, then carries out the algorithm of package kernels'
// documentation.
//
// Symmetric buffers must be 16-byte aligned and the input and output
// aligned to the element size, as the device kernels require.
//
// The buffer size is not among the arguments, so the kernels cannot check
// count against it: the caller does (count*size <= buffer, or buffer/2 for
// HCM; Pipeline uses no buffer and takes any count). HCM keeps its quad
// partials at the byte offset in bits 32–63 of Extra when the caller sets
// them (HCMPartialOffset(bufferSize); it must be a multiple of 16 and at
// least count*size), and otherwise right after the data, at count*size
// rounded up to 16 — which is never beyond HCMPartialOffset(bufferSize)
// when the count fits. The CUDA kernels read Extra the same way.
//
// An output that overlaps a symmetric buffer is safe: when the algorithm
// would overwrite data a peer may still read (one-shot in place in the
// symmetric buffer, or any partial overlap), the result is built aside and
// copied out after the last barrier. (The CUDA one-shot kernel rejects an
// output overlapping this rank's buffer instead.) The one-shot's LL and
// push paths read no symmetric buffer and need no such care; the two-shot,
// which has no closing barrier, rejects an output overlapping another
// rank's buffer (peers may still read their own buffers after it
// returns), which device memory never does.
//
// The one-shot takes the path oneShotPath names: LL lines or pushed data
// through the peers' signal pads, or the classic copy-in and two barriers;
// see package kernels. The pipeline (pipeline.go) moves the
// input in chunks through the same push areas, runs as a grid of one block
// and, reading no symmetric buffer, lets the output lie anywhere.
func AllReduce(algo kernels.Algo, dtype backend.DType) Func {
	return collectiveKernel(algo, dtype, setupAllReduce)
}

// collectiveKernel is the Func of a collective kernel (AllReduceArgs):
// parse the arguments, resolve them with setup, run.
func collectiveKernel[K interface{ run() error }](algo kernels.Algo, dtype backend.DType,
	setup func(context.Context, Memory, kernels.AllReduceArgs, kernels.Algo, backend.DType, string) (K, error)) Func {
	name := kernels.KernelName(algo, dtype)
	return func(ctx context.Context, mem Memory, _ backend.LaunchConfig, args []backend.Arg) error {
		a, err := kernels.ParseAllReduceArgs(args)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		k, err := setup(ctx, mem, a, algo, dtype, name)
		if err != nil {
			return err
		}
		return k.run()
	}
}

// allReduce is one resolved all-reduce launch.
type allReduce struct {
	*launch
	algo  kernels.Algo
	a     kernels.AllReduceArgs
	world int
	size  int // element size
	n     int // bytes reduced
	mask  uint32
	bufs  [][]byte // bufs[r][0:span): everything of rank r's buffer used
	in    []byte
	out   []byte
	// aside, when set, receives the result instead of out until the final
	// barrier (see AllReduce).
	aside []byte
	// HCM only.
	quad  [3]int
	cross int
	half  int
}

func setupAllReduce(ctx context.Context, mem Memory, a kernels.AllReduceArgs, algo kernels.Algo,
	dtype backend.DType, name string) (*allReduce, error) {
	l, err := openCollective(ctx, mem, a, dtype, name)
	if err != nil {
		return nil, err
	}
	size := dtype.Size()
	k := &allReduce{launch: l, algo: algo, a: a, world: int(a.World), size: size, n: int(a.Count) * size}
	k.mask = uint32(1)<<a.World - 1
	span := k.n
	if algo == kernels.Pipeline {
		span = 0 // no symmetric buffer: any count
	}
	if algo == kernels.HCM {
		if err := k.setupHCM(); err != nil {
			return nil, err
		}
		span = k.half + k.n
	}
	if k.bufs, err = l.resolveAligned(mem, a, span, k.n, size); err != nil {
		return nil, err
	}
	if k.n == 0 {
		return k, nil
	}
	if k.in, err = mem.Bytes(a.Input, k.n); err != nil {
		return nil, l.badArgsWrap(err, "input %#x, %d bytes", uint64(a.Input), k.n)
	}
	if k.out, err = mem.Bytes(a.Output, k.n); err != nil {
		return nil, l.badArgsWrap(err, "output %#x, %d bytes", uint64(a.Output), k.n)
	}
	if algo != kernels.Pipeline && k.outputConflicts() {
		if algo == kernels.TwoShot {
			// The result would land after the last barrier, while the peer
			// may still be reading its own buffer.
			for r, b := range k.bufs {
				if r != k.me && overlaps(k.out, b) {
					return nil, k.badArgs("output %#x overlaps the symmetric buffer of rank %d", uint64(a.Output), r)
				}
			}
		}
		k.aside = make([]byte, k.n)
	}
	return k, nil
}

// openCollective starts a collective launch: the status word, then the
// checks every collective kernel makes of its arguments (dtype, op, world,
// a count whose bytes fit an int several times over) and its peers' pads.
func openCollective(ctx context.Context, mem Memory, a kernels.AllReduceArgs, dtype backend.DType, name string) (*launch, error) {
	l := &launch{ctx: ctx, kernel: name, me: int(a.Rank), timeout: time.Duration(min(a.TimeoutNs, math.MaxInt64)),
		call: a.Call, parity: int(a.Call >> 32 & 1)}
	if err := l.resolveStatus(mem, a.Status); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, backend.Wrap(backend.CodeClosed, err, name)
	}
	if a.DType != dtype {
		return nil, l.badArgs("dtype %v, but the kernel handles %v", a.DType, dtype)
	}
	if !a.Op.Kernel() {
		return nil, l.badArgs("invalid reduce op %v", a.Op)
	}
	if a.World < 1 || a.World > kernels.MaxRanks || a.Rank >= a.World {
		return nil, l.badArgs("rank %d of world %d (world must be 1..%d)", a.Rank, a.World, kernels.MaxRanks)
	}
	if a.Count > uint64(math.MaxInt/(4*kernels.MaxRanks*dtype.Size())) {
		return nil, l.badArgs("count %d too large", a.Count)
	}
	if err := l.resolvePads(mem, a.Pads, int(a.World), uint32(1)<<a.World-1); err != nil {
		return nil, err
	}
	return l, nil
}

// resolveAligned is resolveBuffers plus, for a call that moves n > 0
// bytes of size-byte elements, the check that input and output are
// aligned to the element.
func (l *launch) resolveAligned(mem Memory, a kernels.AllReduceArgs, span, n, size int) ([][]byte, error) {
	bufs, err := l.resolveBuffers(mem, a, span)
	if err != nil || n == 0 {
		return bufs, err
	}
	if a.Input%backend.DevicePtr(size) != 0 || a.Output%backend.DevicePtr(size) != 0 {
		return nil, l.badArgs("input %#x or output %#x not aligned to the %d-byte element", uint64(a.Input), uint64(a.Output), size)
	}
	return bufs, nil
}

// resolveBuffers maps the first span bytes of every rank's symmetric
// buffer, each of which must be 16-byte aligned.
func (l *launch) resolveBuffers(mem Memory, a kernels.AllReduceArgs, span int) ([][]byte, error) {
	ptrs, err := l.pointerTable(mem, a.Bufs, int(a.World), "buffer")
	if err != nil {
		return nil, err
	}
	bufs := make([][]byte, len(ptrs))
	for r, p := range ptrs {
		if p%16 != 0 {
			return nil, l.badArgs("buffer of rank %d at %#x is not 16-byte aligned", r, uint64(p))
		}
		if bufs[r], err = mem.Bytes(p, span); err != nil {
			return nil, l.badArgsWrap(err, "buffer of rank %d at %#x, %d bytes", r, uint64(p), span)
		}
	}
	return bufs, nil
}

// setupHCM checks and unpacks Extra and places the partials.
func (k *allReduce) setupHCM() error {
	if k.world != 8 {
		return k.badArgs("HCM needs a world of 8, not %d", k.world)
	}
	k.quad, k.cross, _ = kernels.UnpackHCM(k.a.Extra)
	seen := uint32(1) << k.me
	for _, p := range append(k.quad[:], k.cross) {
		if p >= k.world || seen&(1<<p) != 0 {
			return k.badArgs("HCM peers %v and cross neighbour %d must be distinct ranks other than %d", k.quad, k.cross, k.me)
		}
		seen |= 1 << p
	}
	k.half = (k.n + 15) &^ 15
	if off := k.a.Extra >> 32; off != 0 {
		if off%16 != 0 || off < uint64(k.n) {
			return k.badArgs("HCM partial offset %d must be a multiple of 16 and at least %d", off, k.n)
		}
		k.half = int(off)
	}
	return nil
}

// outputConflicts reports whether writing the output where the algorithm
// writes it could change data a peer may still be reading: the output
// overlaps a symmetric buffer, and is not the one place the algorithm
// allows (this rank's own buffer, exactly, for two-shot and HCM, whose last
// reads of it happen before the barrier that precedes the output). The
// one-shot's LL path reads no symmetric buffer and ignores the answer.
func (k *allReduce) outputConflicts() bool {
	for r, b := range k.bufs {
		if !overlaps(k.out, b) {
			continue
		}
		if r == k.me && k.algo != kernels.OneShot && same(k.out, b) {
			continue
		}
		return true
	}
	return false
}

// overlaps reports whether two byte slices share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// same reports whether a starts where b does.
func same(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.Pointer(&a[0]) == unsafe.Pointer(&b[0])
}

// takeEpoch returns this rank's epoch E (kernels.EpochWord) and leaves
// E+1 there: the push paths' slot is E mod 2. The word is this rank's
// alone and its kernels run one at a time.
func (l *launch) takeEpoch() uint32 {
	w := word(l.pads[l.me], kernels.EpochWord)
	e := atomic.LoadUint32(w)
	atomic.StoreUint32(w, e+1)
	return e
}

// publish is step 1 of the call agreement: this rank's record, and its
// Call in the pad of every other rank of the world.
func (l *launch) publish(world int, rec kernels.Record) {
	if l.call == 0 {
		return
	}
	b := kernels.EncodeRecord(rec)
	copy(l.pads[l.me][kernels.RecordOffset+8:kernels.RecordOffset+kernels.RecordSize], b[8:])
	atomic.StoreUint64(word64(l.pads[l.me], kernels.RecordOffset), l.call)
	for p := range world {
		if p != l.me {
			atomic.StoreUint64(word64(l.pads[p], kernels.CallInWord(l.me, l.parity)), l.call)
		}
	}
}

func (k *allReduce) run() error {
	k.publish(k.world, kernels.Record{Call: k.call, Count: k.a.Count, Info: kernels.LaunchInfo(k.algo, k.a.DType, k.a.Op, k.a.Extra)})
	switch {
	case k.algo == kernels.OneShot && oneShotPath(k.n, k.world) == "ll":
		return k.oneShotLL()
	case k.algo == kernels.OneShot && oneShotPath(k.n, k.world) == "push":
		return k.oneShotPush()
	case k.algo == kernels.TwoShot:
		return k.twoShot()
	case k.algo == kernels.Pipeline:
		return k.pipeline()
	}
	out, ok, err := k.copyIn(0, 0)
	if !ok {
		return err
	}
	switch k.algo {
	case kernels.OneShot:
		ok, err = k.oneShot(out)
	case kernels.HCM:
		ok, err = k.hcm(out)
	}
	if !ok {
		return err
	}
	if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
		return err
	}
	if k.aside != nil {
		cachedCopy(k.out, k.aside)
	}
	return nil
}

// oneShot is the one-shot's classic path: every rank reduces the whole
// input from every buffer.
func (k *allReduce) oneShot(out []byte) (bool, error) {
	srcs := make([][]byte, k.world)
	for r, b := range k.bufs {
		srcs[r] = b[:k.n]
	}
	reduce(k.a.DType, k.a.Op, out, srcs)
	return true, nil
}

// oneShotLL is the one-shot's LL path: send the input as LL lines into
// every peer's pad, receive every peer's lines from this rank's pad, reduce
// in rank order. No barrier; the epoch picks the slot and the flag.
func (k *allReduce) oneShotLL() error {
	c := k.openLL()
	for p := range k.world {
		if p != k.me {
			c.send(p, k.in)
		}
	}
	srcs := make([][]byte, k.world)
	for q := range k.world {
		if q == k.me {
			srcs[q] = k.in
			continue
		}
		got, ok, err := c.receive(q, k.n)
		if !ok {
			return err
		}
		srcs[q] = got
	}
	// No peer reads this rank's output or buffer: no aside needed.
	reduce(k.a.DType, k.a.Op, k.out, srcs)
	return nil
}

// cpuLLMax bounds the Go one-shot's LL path, below the device kernels'
// bound (kernels.OneShotLLMax): on a CPU the LL lines, 4 payload bytes in
// every 8, double the bytes that cross between the ranks' cores, and the
// receiver then clears them. The push path (one barrier) was as fast at
// 1 KiB and faster from 4 KiB: world 2 processes, bf16, 2-core machine,
// 2026-11-26, `intranode bench --algo oneshot,twoshot -b 1K -e 256K
// --replays 15` with the LL path forced and not (µs): 4 KiB 15.9–20.9 LL
// against 11.8 push, 16 KiB 18.2–18.9 against 10.9–11.3, 256 KiB 146–157
// against 105–154 (the two-shot 70–84). Every rank of a job runs these
// kernels, so every rank takes the same path.
const cpuLLMax = 1 << 10

// oneShotPath is the path the Go one-shot takes for n bytes at this world:
// kernels.OneShotPath's, with push for LL above cpuLLMax.
func oneShotPath(n, world int) string {
	p := kernels.OneShotPath(n, world)
	if p == "ll" && n > cpuLLMax {
		return "push"
	}
	return p
}

// oneShotPush is the one-shot's push path: write the input into the slot
// that carries it to each peer, barrier, reduce this rank's input and
// what the peers' slots carry to it; over PushSplitBytes in two rounds,
// the second part's writes before the first part's reduction. openPush
// picks the slots.
func (k *allReduce) oneShotPush() error {
	me := k.me
	padded := (k.n + 15) &^ 15
	parts := []int{0, padded}
	if k.n > kernels.PushSplitBytes {
		parts = []int{0, padded / 32 * 16, padded}
	}
	slot, large, ok, err := k.openPush(k.n, k.mask)
	if !ok {
		return err
	}
	write := func(lo, hi int) {
		for p := range k.world {
			if p == me {
				continue
			}
			dst := slot(me, p)
			cachedCopy(dst[lo:min(hi, k.n)], k.in[min(lo, k.n):min(hi, k.n)])
			if hi > k.n {
				clear(dst[max(lo, k.n):hi])
			}
		}
	}
	reduceAt := func(lo, hi int) {
		hi = min(hi, k.n)
		if lo >= hi {
			return
		}
		srcs := make([][]byte, k.world)
		for q := range k.world {
			if q == me {
				srcs[q] = k.in[lo:hi]
				continue
			}
			srcs[q] = slot(q, me)[lo:hi]
		}
		reduce(k.a.DType, k.a.Op, k.out[lo:hi], srcs)
	}
	write(parts[0], parts[1])
	if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
		return err
	}
	if len(parts) == 3 {
		write(parts[1], parts[2])
		reduceAt(parts[0], parts[1])
		if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
			return err
		}
	}
	reduceAt(parts[len(parts)-2], parts[len(parts)-1])
	return k.closePush(large, k.mask)
}

// openPush starts a push-path call that puts n bytes in each slot: it
// takes the epoch and returns its slots (pushSlots). Over PushSplitBytes
// it first meets every rank of mask, then uses slot 0 in every call, its
// direction by the epoch's parity, and large tells the caller to meet
// them again after its reads (closePush): half the regions of the
// epoch's choice, each still written by its two ranks in turn. At these
// sizes the four regions of a pair no longer fit the cache beside the
// input and output, and the two barriers cost little: one-shot, world 2
// processes, bf16, 4 MiB, on the 2-core development machine
// (2026-11-27), 413-608 µs against 628-1034 with the epoch's four
// regions, four alternations (the two-shot 332-413 in the same runs).
// ok is false when the barrier failed (err says why, or the status word
// does).
func (l *launch) openPush(n int, mask uint32) (slot func(a, b int) []byte, large, ok bool, err error) {
	e := l.takeEpoch()
	if n <= kernels.PushSplitBytes {
		return l.pushSlots(e), false, true, nil
	}
	// Every peer done with the previous call's slots before any write.
	if ok, err := l.barrier(allReduceChannel, mask); !ok {
		return nil, true, false, err
	}
	return l.pushSlots(e & 1 << 1), true, true, nil
}

// closePush ends a push-path call that openPush called large: every rank
// done reading before any writes slot 0 again.
func (l *launch) closePush(large bool, mask uint32) error {
	if !large {
		return nil
	}
	_, err := l.barrier(allReduceChannel, mask)
	return err
}

// pushSlots returns, for the push-path call of epoch e, the push slot
// that carries rank a's data to rank b. Each pair of ranks has a region
// in either's pad: PushData(World, e mod 2, a, b) in b's, where a writes
// it as the device kernels do, and PushData(World, e mod 2, b, a) in a's.
// When bit 1 of e is clear the slot is the region in the receiver's pad,
// which the sender writes; when it is set, the region in the sender's
// pad, which the receiver reads. So each line of a region is written by
// its two ranks in turn. On a CPU, writing a line that this core wrote
// before and a peer has read since costs several times writing one the
// peer wrote last: world 2 processes, bf16, 64 KiB one-shot, on the
// 2-core development machine (2026-11-26), the input's copy took 7.5 µs
// into the peer's pad every time and 1.3 µs in turn (the one-shot 16-19
// µs against 10-12; the two-shot 7-12 in the same runs). The epoch keeps
// the slots safe as before: a region used in call E is used in call E
// only and again in call E+2 at the earliest, which no rank starts before
// every rank has finished call E.
func (l *launch) pushSlots(e uint32) func(a, b int) []byte {
	world := len(l.pads)
	s := int(e & 1)
	return func(a, b int) []byte {
		if e&2 != 0 {
			return l.pads[a][kernels.PushData(world, s, b, a):]
		}
		return l.pads[b][kernels.PushData(world, s, a, b):]
	}
}

// copyIn copies the input into this rank's buffer (unless it is that
// buffer), all but bytes [skipLo, skipHi), which no peer reads, and meets
// every peer at the barrier; it returns where the result goes: the
// output, or the aside buffer when the call has one. ok is false when the
// barrier failed (err says why, or the status word does).
func (k *allReduce) copyIn(skipLo, skipHi int) (out []byte, ok bool, err error) {
	if buf := k.bufs[k.me]; !same(k.in, buf) {
		cachedCopy(buf[:skipLo], k.in[:skipLo])
		cachedCopy(buf[skipHi:k.n], k.in[skipHi:])
	}
	if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
		return nil, false, err
	}
	if k.aside != nil {
		return k.aside, true, nil
	}
	return k.out, true, nil
}

// twoShot: copy in, barrier, reduce this rank's slice into the output and
// every peer's buffer, barrier, copy the other slices out of this rank's
// own buffer. No closing barrier (see package kernels). Unless the input
// shares memory with this rank's buffer, its own slice is reduced straight
// from the input, as the device kernels do: no peer reads that slice of
// the buffer, so it is not copied in.
func (k *allReduce) twoShot() error {
	me := k.me
	lo, hi := k.slice(me)
	fromInput := !overlaps(k.in, k.bufs[me])
	skipLo, skipHi := 0, 0
	if fromInput {
		skipLo, skipHi = lo, hi
	}
	out, ok, err := k.copyIn(skipLo, skipHi)
	if !ok {
		return err
	}
	// Reduce and push to the peers piece by piece, so that each push reads
	// what the reduction has just written from the cache.
	srcs := make([][]byte, k.world)
	for c := lo; c < hi; c += pushPieceBytes {
		e := min(c+pushPieceBytes, hi)
		for r, b := range k.bufs {
			srcs[r] = b[c:e]
		}
		if fromInput {
			srcs[me] = k.in[c:e]
		}
		reduce(k.a.DType, k.a.Op, out[c:e], srcs)
		for p, b := range k.bufs {
			if p != me {
				cachedCopy(b[c:e], out[c:e])
			}
		}
	}
	if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
		return err
	}
	for p := range k.world {
		lo, hi := k.slice(p)
		if p != me && !same(out[lo:hi], k.bufs[me][lo:hi]) {
			cachedCopy(out[lo:hi], k.bufs[me][lo:hi])
		}
	}
	// After the second barrier only this rank touches its own buffer, so a
	// result set aside because the output overlaps that buffer may land now.
	if k.aside != nil {
		cachedCopy(k.out, k.aside)
	}
	return nil
}

// pushPieceBytes is how much of its slice the two-shot reduces before
// pushing it to the peers: a multiple of 16 bytes (the slices' alignment,
// which the vector loops need) small enough to stay in a core's L2.
const pushPieceBytes = 64 << 10

// slice is rank r's two-shot slice in bytes.
func (k *allReduce) slice(r int) (lo, hi int) {
	l, h := kernels.SliceRange(k.a.Count, k.world, r, k.size)
	return int(l) * k.size, int(h) * k.size
}

// hcm: reduce inside the quad into the upper part of this rank's buffer,
// then combine with the cross neighbour's partial, the partial of the quad
// holding rank 0 first so that both quads compute the same bits.
func (k *allReduce) hcm(out []byte) (bool, error) {
	group := []int{k.me, k.quad[0], k.quad[1], k.quad[2]}
	slices.Sort(group)
	srcs := make([][]byte, 0, len(group))
	for _, r := range group {
		srcs = append(srcs, k.bufs[r][:k.n])
	}
	mine := k.bufs[k.me][k.half : k.half+k.n]
	reduce(k.a.DType, k.a.Op, mine, srcs)
	if ok, err := k.barrier(allReduceChannel, k.mask); !ok {
		return false, err
	}
	theirs := k.bufs[k.cross][k.half : k.half+k.n]
	if group[0] == 0 {
		reduce(k.a.DType, k.a.Op, out, [][]byte{mine, theirs})
	} else {
		reduce(k.a.DType, k.a.Op, out, [][]byte{theirs, mine})
	}
	return true, nil
}
