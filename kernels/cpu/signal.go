package cpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// Back-off of a wait: yield to other goroutines at least spinYields times
// and for at least spinFor, then sleep from minSleep doubling up to
// maxSleep between checks. Yielding keeps eight ranks on two cores moving
// (the Go scheduler runs the others); sleeping frees the core for ranks in
// other processes. The yield phase is measured in time as well as in turns
// because a short sleep costs far more than asked when the process is
// otherwise idle (the runtime's timers then wake it ~1ms late), and a peer
// that is only a few microseconds behind should not cost that. With ranks
// in separate processes a 20µs window left most waits sleeping through a
// ~1ms timer wake-up (docs/PERFORMANCE.md: 1 KiB at world 2 took ~1.1ms per
// call); 500µs brought it to ~8µs and did not slow 8 goroutine ranks on 2
// cores. 500µs still let two ranks fall into step a call apart: a rank
// that came more than 500µs late (a garbage collection, the host's work
// between the bench's rows) found its peer asleep for a timer's ~1ms in
// the next call, which made the peer wait past 500µs and sleep in turn,
// call after call (a trace of the bench's first row at 1 KiB: 1.6–1.9 ms
// per call for ten calls, then 3–7µs once both woke together; the row's
// median replay 818µs). Spinning for 5ms, which a late host catches up
// within, ended that (the same row 10–20µs, later rows unchanged); yielding
// the thread on every other turn still leaves the core to whoever else
// needs it.
const (
	spinYields = 50
	spinFor    = 5 * time.Millisecond
	minSleep   = time.Microsecond
	maxSleep   = 50 * time.Microsecond
)

// word is the uint32 at byte offset off of b, for sync/atomic. b comes from
// Memory.Bytes and starts 4-byte aligned (checked when it is resolved), and
// every offset used is a multiple of 4.
func word(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// word64 is the uint64 at byte offset off of b: half of an LL line. Pads
// are 16-byte aligned (checked when they are resolved) and line offsets
// are multiples of 16, so every such word is 8-byte aligned.
func word64(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

// aligned reports whether b starts on a multiple of n bytes.
func aligned(b []byte, n uintptr) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%n == 0
}

// launch is what every kernel works with once its arguments are resolved:
// the signal pads of the ranks it talks to and the status word.
type launch struct {
	ctx     context.Context
	kernel  string
	me      int
	pads    [][]byte // by rank; nil for ranks this kernel does not signal
	status  []byte   // 4 bytes, nil when the caller passed no status word
	timeout time.Duration
	// badPeer and badChannel go into a StatusBadArgs word, as the device
	// kernels fill them: the peer of a put or wait and the channel of a
	// signal kernel, 0 otherwise.
	badPeer, badChannel int
	// call is the all-reduce launch's Call (0 for signal kernels: no
	// agreement check) and parity its sequence number mod 2.
	call   uint64
	parity int
}

// callIn is the word of this rank's pad that rank src writes its Call into.
func (l *launch) callIn(src int) *uint64 {
	return word64(l.pads[l.me], kernels.CallInWord(src, l.parity))
}

// differs records that rank src made a different call (see package
// kernels, "Call agreement").
func (l *launch) differs(src, ch int) (bool, error) {
	if !l.record(kernels.EncodeStatus(kernels.StatusMismatch, src, ch)) {
		return false, backend.Errorf(backend.CodeInvalidArgument, "%s: rank %d: rank %d made a different all-reduce call",
			l.kernel, l.me, src)
	}
	return false, nil
}

// watch is the agreement check of a spin for rank src: whether src's Call
// for this sequence number differs, or the launch has already failed (the
// status word is set; the Go kernels run as one block, so only a caller's
// earlier failure can have set it).
func (l *launch) watch(src, ch int) (stop bool, ok bool, err error) {
	if l.call == 0 {
		return false, false, nil
	}
	if l.status != nil && atomic.LoadUint32(word(l.status, 0)) != 0 {
		return true, false, nil
	}
	if v := atomic.LoadUint64(l.callIn(src)); v>>32 == l.call>>32 && v != l.call {
		ok, err := l.differs(src, ch)
		return true, ok, err
	}
	return false, false, nil
}

// agrees is the check after a signal from src: src published its Call
// before signalling, so anything else there is a different call.
func (l *launch) agrees(src, ch int) (bool, error) {
	if l.call == 0 || atomic.LoadUint64(l.callIn(src)) == l.call {
		return true, nil
	}
	return l.differs(src, ch)
}

// badArgs records StatusBadArgs and returns an error matching
// backend.ErrInvalidArgument.
func (l *launch) badArgs(format string, args ...any) error {
	return l.badArgsWrap(nil, format, args...)
}

// badArgsWrap is badArgs for a failure caused by err, which the result
// wraps.
func (l *launch) badArgsWrap(err error, format string, args ...any) error {
	l.record(kernels.EncodeStatus(kernels.StatusBadArgs, l.badPeer, l.badChannel))
	msg := l.kernel + ": " + fmt.Sprintf(format, args...)
	if err != nil {
		return backend.Wrap(backend.CodeInvalidArgument, err, msg)
	}
	return backend.Errorf(backend.CodeInvalidArgument, "%s", msg)
}

// record stores w into the status word unless an earlier failure is
// already there. It reports whether there is a status word.
func (l *launch) record(w uint32) bool {
	if l.status == nil {
		return false
	}
	atomic.CompareAndSwapUint32(word(l.status, 0), 0, w)
	return true
}

// resolveStatus maps the status word. Without one, nothing can be recorded,
// so errors are only returned.
func (l *launch) resolveStatus(mem Memory, p backend.DevicePtr) error {
	if p == 0 {
		return nil
	}
	b, err := mem.Bytes(p, 4)
	if err != nil {
		return backend.Wrap(backend.CodeInvalidArgument, err, fmt.Sprintf("%s: status word %#x", l.kernel, uint64(p)))
	}
	if !aligned(b, 4) {
		return backend.Errorf(backend.CodeInvalidArgument, "%s: status word %#x is not 4-byte aligned", l.kernel, uint64(p))
	}
	l.status = b
	return nil
}

// pointerTable reads a device array of world uint64 pointers.
func (l *launch) pointerTable(mem Memory, p backend.DevicePtr, world int, what string) ([]backend.DevicePtr, error) {
	b, err := mem.Bytes(p, 8*world)
	if err != nil {
		return nil, l.badArgsWrap(err, "%s table %#x", what, uint64(p))
	}
	ptrs := make([]backend.DevicePtr, world)
	for r := range ptrs {
		ptrs[r] = backend.DevicePtr(binary.LittleEndian.Uint64(b[8*r:]))
	}
	return ptrs, nil
}

// resolvePads maps the signal pads of the ranks in mask (a bit per rank)
// and of this rank.
func (l *launch) resolvePads(mem Memory, table backend.DevicePtr, world int, mask uint32) error {
	ptrs, err := l.pointerTable(mem, table, world, "signal pad")
	if err != nil {
		return err
	}
	l.pads = make([][]byte, world)
	mask |= 1 << l.me
	for r, p := range ptrs {
		if mask&(1<<r) == 0 {
			continue
		}
		b, err := mem.Bytes(p, kernels.SignalPadSize)
		if err != nil {
			return l.badArgsWrap(err, "signal pad of rank %d at %#x", r, uint64(p))
		}
		if !aligned(b, 16) {
			return l.badArgs("signal pad of rank %d at %#x is not 16-byte aligned", r, uint64(p))
		}
		l.pads[r] = b
	}
	return nil
}

// put is PutSignal(dst, ch): count the signal in sent[ch][dst] and publish
// the count in dst's inbox[ch][me]. The atomic store orders every earlier
// write of this kernel before the peer's load that sees it.
func (l *launch) put(dst, ch int) {
	sent := word(l.pads[l.me], kernels.SentWord(ch, dst))
	s := atomic.LoadUint32(sent) + 1
	atomic.StoreUint32(sent, s)
	atomic.StoreUint32(word(l.pads[dst], kernels.InboxWord(ch, l.me)), s)
}

// wait is WaitSignal(src, ch). It returns false when it gave up: the
// deadline passed (recorded in the status word, error nil) or ctx ended
// (error).
func (l *launch) wait(src, ch int) (bool, error) {
	recv := word(l.pads[l.me], kernels.RecvWord(ch, src))
	want := atomic.LoadUint32(recv) + 1
	inbox := word(l.pads[l.me], kernels.InboxWord(ch, src))
	ok, err := l.spin(src, ch, func() bool {
		// Wrap-safe: the counters only grow, by less than 2^31 between a
		// put and the wait that consumes it.
		return int32(atomic.LoadUint32(inbox)-want) >= 0
	})
	if !ok {
		return false, err
	}
	atomic.StoreUint32(recv, want)
	return l.agrees(src, ch)
}

// spin waits until ready() holds, for something rank src sends on channel
// ch, with the back-off and deadline of a wait (its result is wait's).
func (l *launch) spin(src, ch int, ready func() bool) (bool, error) {
	var start time.Time
	sleep := minSleep
	for i := 0; ; i++ {
		if ready() {
			return true, nil
		}
		if stop, ok, err := l.watch(src, ch); stop {
			return ok, err
		}
		now := time.Now()
		if i == 0 {
			start = now
		}
		if now.Sub(start) > l.timeout {
			if !l.record(kernels.EncodeStatus(kernels.StatusTimeout, src, ch)) {
				return false, backend.Errorf(backend.CodeTimeout, "%s: rank %d: rank %d did not signal on channel %d within %v",
					l.kernel, l.me, src, ch, l.timeout)
			}
			return false, nil
		}
		select {
		case <-l.ctx.Done():
			// The module went with a comm that was closed: when the host
			// set the status word first (kernels.StatusClosed), the wait
			// stops as the device's does, without an error of its own.
			if stop, ok, err := l.watch(src, ch); stop {
				return ok, err
			}
			return false, backend.Wrap(backend.CodeClosed, l.ctx.Err(),
				fmt.Sprintf("%s: rank %d waiting for rank %d on channel %d", l.kernel, l.me, src, ch))
		default:
		}
		if i < spinYields || now.Sub(start) < spinFor {
			// Past the first spinYields turns, every other turn yields the
			// OS thread as well: with more ranks than cores a peer rank in
			// another process may be waiting for this core, which the Go
			// scheduler cannot see (world 4 on two cores: 1.7 ms per call
			// without, 80 µs with).
			if i >= spinYields && i&1 == 1 {
				osYield()
			} else {
				runtime.Gosched()
			}
			continue
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, maxSleep)
	}
}

// barrier is Barrier(ch, mask): post, then receive. Its result is wait's.
func (l *launch) barrier(ch int, mask uint32) (bool, error) {
	l.post(ch, mask)
	return l.receive(ch, mask)
}

// eachPeer calls f for every other rank of mask, in ascending order.
func (l *launch) eachPeer(mask uint32, f func(p int)) {
	for p := range l.pads {
		if p != l.me && mask&(1<<p) != 0 {
			f(p)
		}
	}
}

// post signals every other rank of mask on ch (the first half of a
// barrier, for kernels that work between the halves).
func (l *launch) post(ch int, mask uint32) { l.eachPeer(mask, func(p int) { l.put(p, ch) }) }

// receive waits for the next signal of every other rank of mask on ch, in
// ascending order; false when a wait failed (err says why, or the status
// word does).
func (l *launch) receive(ch int, mask uint32) (bool, error) {
	for p := range l.pads {
		if p != l.me && mask&(1<<p) != 0 {
			if ok, err := l.wait(p, ch); !ok {
				return false, err
			}
		}
	}
	return true, nil
}

// signalKind tells the signal kernels apart for validation.
type signalKind int

const (
	kindBarrier signalKind = iota
	kindPut
	kindWait
)

// Barrier is the kernel kernels.BarrierKernel (SignalArgs): a barrier among
// the ranks of Mask on Channel.
func Barrier(ctx context.Context, mem Memory, _ backend.LaunchConfig, args []backend.Arg) error {
	l, a, err := setupSignal(ctx, mem, args, kindBarrier, kernels.BarrierKernel)
	if err != nil {
		return err
	}
	_, err = l.barrier(int(a.Channel), a.Mask)
	return err
}

// Confirm is the kernel kernels.ConfirmKernel (SignalArgs): Barrier,
// unless the word after the status word (kernels.FailedWord) is set.
func Confirm(ctx context.Context, mem Memory, _ backend.LaunchConfig, args []backend.Arg) error {
	l, a, err := setupSignal(ctx, mem, args, kindBarrier, kernels.ConfirmKernel)
	if err != nil {
		return err
	}
	if a.Status != 0 {
		b, err := mem.Bytes(a.Status, 4*(kernels.FailedWord+1))
		if err != nil {
			return backend.Wrap(backend.CodeInvalidArgument, err, fmt.Sprintf("%s: status words %#x", kernels.ConfirmKernel, uint64(a.Status)))
		}
		if atomic.LoadUint32(word(b, 4*kernels.FailedWord)) != 0 {
			return nil
		}
	}
	_, err = l.barrier(int(a.Channel), a.Mask)
	return err
}

// PutSignal is the kernel kernels.PutSignalKernel (SignalArgs): signal
// rank Peer on Channel.
func PutSignal(ctx context.Context, mem Memory, _ backend.LaunchConfig, args []backend.Arg) error {
	l, a, err := setupSignal(ctx, mem, args, kindPut, kernels.PutSignalKernel)
	if err != nil {
		return err
	}
	l.put(int(a.Peer), int(a.Channel))
	return nil
}

// WaitSignal is the kernel kernels.WaitSignalKernel (SignalArgs): wait for
// a signal from rank Peer on Channel.
func WaitSignal(ctx context.Context, mem Memory, _ backend.LaunchConfig, args []backend.Arg) error {
	l, a, err := setupSignal(ctx, mem, args, kindWait, kernels.WaitSignalKernel)
	if err != nil {
		return err
	}
	_, err = l.wait(int(a.Peer), int(a.Channel))
	return err
}

// setupSignal parses and checks a signal kernel's arguments and maps the
// pads it needs. Peer may be this rank (a signal to oneself counts like
// any other); a barrier's Mask must include this rank and no rank beyond
// World.
func setupSignal(ctx context.Context, mem Memory, args []backend.Arg, kind signalKind, name string) (*launch, kernels.SignalArgs, error) {
	a, err := kernels.ParseSignalArgs(args)
	if err != nil {
		return nil, a, fmt.Errorf("%s: %w", name, err)
	}
	l := &launch{ctx: ctx, kernel: name, me: int(a.Rank), timeout: time.Duration(min(a.TimeoutNs, math.MaxInt64)),
		badChannel: int(a.Channel)}
	if kind != kindBarrier {
		l.badPeer = int(a.Peer)
	}
	if err := l.resolveStatus(mem, a.Status); err != nil {
		return nil, a, err
	}
	if err := ctx.Err(); err != nil {
		return nil, a, backend.Wrap(backend.CodeClosed, err, name)
	}
	if a.World < 1 || a.World > kernels.MaxRanks || a.Rank >= a.World {
		return nil, a, l.badArgs("rank %d of world %d (world must be 1..%d)", a.Rank, a.World, kernels.MaxRanks)
	}
	if a.Channel >= kernels.NumChannels {
		return nil, a, l.badArgs("channel %d out of range [0,%d)", a.Channel, kernels.NumChannels)
	}
	var mask uint32
	switch kind {
	case kindBarrier:
		if a.Mask&(1<<a.Rank) == 0 || a.Mask>>a.World != 0 {
			return nil, a, l.badArgs("barrier mask %#x must include rank %d and only ranks below %d", a.Mask, a.Rank, a.World)
		}
		mask = a.Mask
	case kindPut, kindWait:
		if a.Peer >= a.World {
			return nil, a, l.badArgs("peer %d out of range [0,%d)", a.Peer, a.World)
		}
		if kind == kindPut {
			mask = 1 << a.Peer
		}
	}
	if err := l.resolvePads(mem, a.Pads, int(a.World), mask); err != nil {
		return nil, a, err
	}
	return l, a, nil
}
