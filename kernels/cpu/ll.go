package cpu

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

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
// Go's atomics are sequentially consistent, so each line's first half is
// a plain store and its second half an atomic one, the last line last: a
// receiver that sees the flag in the last line's second half has every
// earlier line too, and checks each one's flags as the ABI says.
func (c llCall) send(p int, data []byte) {
	n := len(data)
	nlines := (n + 15) &^ 15 / 8
	// Line j carries payload bytes [8j, 8j+8), zero past the data.
	payload := func(j int) uint64 {
		if 8*j+8 <= n {
			return binary.LittleEndian.Uint64(data[8*j:])
		}
		var w [8]byte
		if 8*j < n {
			copy(w[:], data[8*j:])
		}
		return binary.LittleEndian.Uint64(w[:])
	}
	flag := uint64(c.f) << 32
	off := kernels.LLLine(len(c.l.pads), c.s, c.l.me, p, 0)
	// Line j is the words 2j (first half) and 2j+1 (second half).
	lines := elems[uint64](c.l.pads[p][off : off+16*nlines])
	full := n / 8 // lines whose payload lies wholly in data
	// First halves in one pass, second halves in another: an atomic store
	// drains the store buffer, so storing both halves line by line would
	// wait for every line's cache line in turn. The second halves are
	// atomic because a peer whose call differs in count watches its own
	// last line's half, which may be any of these.
	for j := range full {
		lines[2*j] = uint64(uint32(binary.LittleEndian.Uint64(data[8*j:]))) | flag
	}
	for j := full; j < nlines; j++ {
		lines[2*j] = uint64(uint32(payload(j))) | flag
	}
	for j := range full {
		atomic.StoreUint64(&lines[2*j+1], binary.LittleEndian.Uint64(data[8*j:])>>32|flag)
	}
	for j := full; j < nlines; j++ {
		atomic.StoreUint64(&lines[2*j+1], payload(j)>>32|flag)
	}
}

// receive waits for rank q's n bytes of LL lines in slot s of this rank's
// pad and returns them, clearing the lines. ok is false when it gave up
// (err says why, or the status word does): the deadline, the context, or a
// line of this epoch from a call that differs.
func (c llCall) receive(q, n int) (data []byte, ok bool, err error) {
	l := c.l
	padded := (n + 15) &^ 15
	nlines := padded / 8
	off := kernels.LLLine(len(l.pads), c.s, q, l.me, 0)
	pad := l.pads[l.me]
	tail := word64(pad, off+16*nlines-8)
	differs := false
	if ok, err := l.spin(q, allReduceChannel, func() bool {
		g := uint32(atomic.LoadUint64(tail) >> 32)
		differs = kernels.LLMismatch(g, c.f)
		return g == c.f || differs
	}); !ok {
		return nil, false, err
	}
	if differs {
		_, err := l.differs(q, allReduceChannel)
		return nil, false, err
	}
	got := make([]byte, padded)
	lines := elems[uint64](pad[off : off+16*nlines])
	for j := range nlines {
		w0, w1 := lines[2*j], lines[2*j+1]
		if uint32(w0>>32) != c.f || uint32(w1>>32) != c.f {
			return nil, false, fmt.Errorf("%s: rank %d: LL line %d from rank %d lacks flag %d", l.kernel, l.me, j, q, c.f)
		}
		binary.LittleEndian.PutUint64(got[8*j:], w0&0xffffffff|w1<<32)
	}
	// Consumed lines are cleared, so that a line in a slot is always of
	// the call in progress: the flag's epoch byte repeats every 256 calls,
	// and a stale line of one of those would pass for a differing call,
	// or, with a 23-bit hash that matched, for data.
	clear(pad[off : off+16*nlines])
	return got[:n], true, nil
}
