package cpu

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/intranode/intranode/internal/race"
	"github.com/intranode/intranode/internal/vec"
	"github.com/intranode/intranode/kernels"
)

// llCall is one call on the LL slots (kernels/abi.go, "The LL path"): the
// slot s and the flag f that this rank's epoch gives it.
type llCall struct {
	l *launch
	s int
	f uint32
}

// openLL takes this rank's epoch for an LL call.
func (l *launch) openLL() llCall {
	e := l.takeEpoch()
	return llCall{l: l, s: int(e & 1), f: kernels.LLFlag(e, l.call)}
}

// send writes data, zero-padded to 16 bytes, as LL lines into this rank's
// region of slot s of rank p's pad.
//
// Go's atomics are sequentially consistent, and a receiver that sees the
// flag in the last line's second half (written last, atomically) has every
// earlier line too, and checks each one's flags as the ABI says. The
// earlier lines are plain 8-byte stores (one instruction, so a reader never
// sees half a word), except under the race detector: a peer whose call
// differs in count watches its own last line, which may be any of these,
// with an atomic load, so there every second half is an atomic store (in a
// pass after the first halves: an atomic store drains the store buffer,
// and storing both halves line by line would wait for every line's cache
// line in turn). Without the detector those atomic stores cost a 256 KiB
// one-shot most of its time.
func (c llCall) send(p int, data []byte) {
	nlines := (len(data) + 15) &^ 15 / 8
	off := kernels.LLLine(len(c.l.pads), c.s, c.l.me, p, 0)
	writeLines(elems[uint64](c.l.pads[p][off:off+16*nlines]), data, c.f, race.Enabled)
}

// writeLines is send's work: data as LL lines with flag f, line j being
// the words 2j (first half) and 2j+1 (second half) and carrying payload
// bytes [8j, 8j+8), zero past the data; every second half stored
// atomically if atomicHalves, else only the last.
func writeLines(lines []uint64, data []byte, f uint32, atomicHalves bool) {
	flag := uint64(f) << 32
	// The payload of the last two lines, zero-padded; the lines before
	// them read the data in place, as words when it is aligned.
	tail := len(data) &^ 15
	var last [16]byte
	copy(last[:], data[tail:])
	nlines := len(lines) / 2
	payload := func(j int) uint64 {
		if 8*j < tail {
			return binary.LittleEndian.Uint64(data[8*j:])
		}
		return binary.LittleEndian.Uint64(last[8*j-tail:])
	}
	if atomicHalves {
		// First halves in one pass, second halves in another: an atomic
		// store drains the store buffer, so storing both halves line by
		// line would wait for every line's cache line in turn.
		for j := range nlines {
			lines[2*j] = payload(j)&0xffffffff | flag
		}
		for j := range nlines {
			atomic.StoreUint64(&lines[2*j+1], payload(j)>>32|flag)
		}
		return
	}
	if aligned(data, 8) {
		words := elems[uint64](data[:tail])
		k := vec.ToLines(lines, words, flag)
		toLines(lines[2*k:tail/4], words[k:], flag)
	} else {
		for j := range tail / 8 {
			w := binary.LittleEndian.Uint64(data[8*j:])
			lines[2*j] = w&0xffffffff | flag
			lines[2*j+1] = w>>32 | flag
		}
	}
	for j := tail / 8; j < nlines; j++ {
		lines[2*j] = payload(j)&0xffffffff | flag
		if j < nlines-1 {
			lines[2*j+1] = payload(j)>>32 | flag
		}
	}
	atomic.StoreUint64(&lines[2*nlines-1], payload(nlines-1)>>32|flag)
}

// toLines is writeLines' loop over whole lines: payload word j into
// lines 2j and 2j+1 (len(lines) == 2*len(words)). A function of its own,
// so that nothing else competes for its registers (inside writeLines the
// compiler kept the index on the stack), for what the vector loop leaves.
func toLines(lines, words []uint64, flag uint64) {
	for j, w := range words {
		pair := lines[2*j : 2*j+2 : 2*j+2]
		pair[0] = w&0xffffffff | flag
		pair[1] = w>>32 | flag
	}
}

// await waits for rank q's n bytes of LL lines in slot s of this rank's
// pad: until the last line's second half carries this call's flag. ok is
// false when it gave up (err says why, or the status word does): the
// deadline, the context, or a line of this epoch from a call that differs.
func (c llCall) await(q, n int) (ok bool, err error) {
	l := c.l
	off := kernels.LLLine(len(l.pads), c.s, q, l.me, 0)
	tail := word64(l.pads[l.me], off+2*((n+15)&^15)-8)
	differs := false
	if ok, err := l.spin(q, allReduceChannel, func() bool {
		g := uint32(atomic.LoadUint64(tail) >> 32)
		differs = kernels.LLMismatch(g, c.f)
		return g == c.f || differs
	}); !ok {
		return false, err
	}
	if differs {
		return l.differs(q, allReduceChannel)
	}
	return true, nil
}

// decode copies rank q's payload, which await has seen arrive, into dst,
// checking each line's flags.
func (c llCall) decode(q int, dst []byte) error {
	l := c.l
	nlines := (len(dst) + 7) / 8
	off := kernels.LLLine(len(l.pads), c.s, q, l.me, 0)
	lines := elems[uint64](l.pads[l.me][off : off+16*nlines])
	flag := uint64(c.f) << 32
	k, ok := 0, true
	if aligned(dst, 8) {
		k, ok = vec.FromLines(elems[uint64](dst[:len(dst)&^7]), lines, flag)
	}
	for j := k; j < nlines && ok; j++ {
		w0, w1 := lines[2*j], lines[2*j+1]
		ok = w0&^0xffffffff == flag && w1&^0xffffffff == flag
		w := w0&0xffffffff | w1<<32
		if b := dst[8*j:]; len(b) >= 8 {
			binary.LittleEndian.PutUint64(b, w)
		} else {
			var part [8]byte
			binary.LittleEndian.PutUint64(part[:], w)
			copy(b, part[:])
		}
	}
	if ok {
		return nil
	}
	for j := range 2 * nlines {
		if lines[j]&^0xffffffff != flag {
			return fmt.Errorf("%s: rank %d: LL line %d from rank %d lacks flag %d", l.kernel, l.me, j/2, q, c.f)
		}
	}
	return nil
}

// release clears rank q's n bytes of lines once consumed, so that a line
// in a slot is always of the call in progress: the flag's epoch byte
// repeats every 256 calls, and a stale line of one of those would pass for
// a differing call, or, with a 23-bit hash that matched, for data.
func (c llCall) release(q, n int) {
	off := kernels.LLLine(len(c.l.pads), c.s, q, c.l.me, 0)
	clear(c.l.pads[c.l.me][off : off+2*((n+15)&^15)])
}

// receive waits for rank q's n bytes of LL lines in slot s of this rank's
// pad and returns them, releasing the lines (await, decode, release).
func (c llCall) receive(q, n int) (data []byte, ok bool, err error) {
	if ok, err := c.await(q, n); !ok {
		return nil, false, err
	}
	data = make([]byte, n)
	if err := c.decode(q, data); err != nil {
		return nil, false, err
	}
	c.release(q, n)
	return data, true, nil
}
