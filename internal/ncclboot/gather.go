package ncclboot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/intranode/intranode/backend"
)

// ErrSequenceLost is the bootstrap's failure once one of its all-gathers
// on the NCCL communicator did not complete (a rank that made its first
// eligible call too late, or is gone, or an NCCL error): the communicator
// may then hold a collective of this rank's that its peers match with
// another call, or theirs that this rank would match with its next call.
// Its call sequence is lost, so no further call may go to it; only
// ncclCommAbort (or ncclCommDestroy) is safe.
var ErrSequenceLost = errors.New("the NCCL communicator's call sequence is lost")

// allGatherFunc all-gathers one byte string per rank, in rank order. Every
// rank must call it the same number of times.
type allGatherFunc func(ctx context.Context, mine []byte) ([][]byte, error)

// Round tags: a round carries keys (roundKeys) or ends the bootstrap
// (roundDone, with this rank's verdict).
const (
	roundKeys byte = 'K'
	roundDone byte = 'D'
)

// gatherStore is a store.Store whose ranks meet only through all-gathers
// of the NCCL communicator being accelerated, so that the bootstrap needs
// no server, port or variable of its own. A Set is kept locally until the
// next round; a Get or Wait of a key not known yet runs a round in which
// every rank contributes what it set since the last one. collective's
// rendezvous only ever exchanges (every rank sets its key, then reads
// everyone's), so every rank runs the same rounds. Counters, deletes and
// compare-and-set are local: the rendezvous uses them only on keys of
// one rank.
//
// A round in which some rank has ended its bootstrap (roundDone: it
// failed, or finished while others wait) ends every rank's: the store
// then refuses waits, and done reports the verdicts. After seal, a wait
// that would need a round fails at once: nothing may call NCCL behind the
// caller's back once the comm is formed (a Close after a peer died must
// not hang in a round).
type gatherStore struct {
	gather allGatherFunc
	world  int

	mu      sync.Mutex
	kv      map[string][]byte
	pending map[string][]byte
	ended   []byte // the verdicts of the round that ended the bootstrap, one per rank
	quit    []int  // the ranks that ended it with a failure of their own
	sealed  bool
	closed  bool
	rounds  int
	lost    error // ErrSequenceLost, once an all-gather failed: no more rounds
}

func newGatherStore(world int, gather allGatherFunc) *gatherStore {
	return &gatherStore{gather: gather, world: world, kv: map[string][]byte{}, pending: map[string][]byte{}}
}

func encodeRound(tag byte, verdict byte, kv map[string][]byte) []byte {
	b := []byte{tag, verdict}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(kv)))
	for k, v := range kv {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func decodeRound(b []byte) (tag, verdict byte, kv map[string][]byte, err error) {
	bad := fmt.Errorf("malformed bootstrap round of %d bytes", len(b))
	if len(b) < 6 {
		return 0, 0, nil, bad
	}
	tag, verdict = b[0], b[1]
	n := binary.LittleEndian.Uint32(b[2:])
	b = b[6:]
	kv = map[string][]byte{}
	field := func() ([]byte, bool) {
		if len(b) < 4 {
			return nil, false
		}
		l := binary.LittleEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return nil, false
		}
		f := b[4 : 4+l]
		b = b[4+l:]
		return f, true
	}
	for range n {
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return 0, 0, nil, bad
		}
		kv[string(k)] = append([]byte(nil), v...)
	}
	return tag, verdict, kv, nil
}

// round runs one all-gather of this rank's pending keys; the caller holds
// g.mu.
func (g *gatherStore) round(ctx context.Context) error {
	if g.sealed {
		return backend.Errorf(backend.CodeClosed, "intranode bootstrap: the bootstrap is over; no more rounds on the NCCL communicator")
	}
	if g.lost != nil {
		return g.lost
	}
	if g.ended != nil {
		return backend.Errorf(backend.CodePeerFailed, "intranode bootstrap: %s", g.endedText())
	}
	all, err := g.gather(ctx, encodeRound(roundKeys, 0, g.pending))
	if err != nil {
		return g.lose(err)
	}
	g.rounds++
	g.pending = map[string][]byte{}
	var verdicts []byte
	for r, b := range all {
		tag, verdict, kv, err := decodeRound(b)
		if err != nil {
			return backend.Wrap(backend.CodeInternal, err, "intranode bootstrap: rank "+strconv.Itoa(r))
		}
		if tag == roundDone {
			if verdict == 0 {
				g.quit = append(g.quit, r)
			}
			if verdicts == nil {
				verdicts = make([]byte, len(all))
				for i := range verdicts {
					verdicts[i] = 1
				}
			}
			verdicts[r] = verdict
		}
		for k, v := range kv {
			g.kv[k] = v
		}
	}
	if verdicts != nil {
		for r, b := range all {
			if b[0] == roundKeys {
				verdicts[r] = 0 // still forming: it cannot have succeeded
			}
		}
		g.ended = verdicts
		return backend.Errorf(backend.CodePeerFailed, "intranode bootstrap: %s", g.endedText())
	}
	return nil
}

// waitCode is the code of a wait that ended with err: closed where it was
// cancelled (the communicator is being aborted), a timeout where it ran
// out, else other.
func waitCode(err error, other backend.Code) backend.Code {
	switch {
	case errors.Is(err, context.Canceled) || backend.CodeOf(err) == backend.CodeClosed:
		return backend.CodeClosed
	case errors.Is(err, context.DeadlineExceeded) || backend.CodeOf(err) == backend.CodeTimeout:
		return backend.CodeTimeout
	}
	return other
}

// lose records that an all-gather failed (err) and returns the error
// every later round and finish returns, coded by waitCode (a peer's
// failure where the wait did not end it); the caller holds g.mu.
func (g *gatherStore) lose(err error) error {
	code := waitCode(err, backend.CodePeerFailed)
	g.lost = fmt.Errorf("intranode bootstrap: %w: %w", ErrSequenceLost, backend.Wrap(code, err, "an all-gather on it did not complete"))
	return g.lost
}

func (g *gatherStore) endedText() string {
	ranks := func(rs []int) string {
		s := make([]string, len(rs))
		for i, r := range rs {
			s[i] = strconv.Itoa(r)
		}
		return strings.Join(s, " ")
	}
	if len(g.quit) > 0 {
		return fmt.Sprintf("ranks [%s] failed to form the comm", ranks(g.quit))
	}
	var failed []int
	for r, v := range g.ended {
		if v == 0 {
			failed = append(failed, r)
		}
	}
	return fmt.Sprintf("ranks [%s] did not form the comm", ranks(failed))
}

// finish runs the round that ends the bootstrap, with this rank's verdict,
// unless a round already ended it, and reports whether every rank formed
// the comm. It seals the store. After a failed all-gather it runs no
// round and returns ErrSequenceLost.
func (g *gatherStore) finish(ctx context.Context, ok bool) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer func() { g.sealed = true }()
	if g.lost != nil {
		return false, g.lost
	}
	if g.ended == nil {
		v := byte(0)
		if ok {
			v = 1
		}
		all, err := g.gather(ctx, encodeRound(roundDone, v, nil))
		if err != nil {
			return false, g.lose(err)
		}
		g.ended = make([]byte, len(all))
		for r, b := range all {
			g.ended[r] = 0
			if len(b) >= 2 && b[0] == roundDone {
				g.ended[r] = b[1]
				if b[1] == 0 {
					g.quit = append(g.quit, r)
				}
			}
		}
	}
	for _, v := range g.ended {
		if v == 0 {
			return false, nil
		}
	}
	return true, nil
}

func (g *gatherStore) usable() error {
	if g.closed {
		return backend.Errorf(backend.CodeClosed, "intranode bootstrap store: closed")
	}
	return nil
}

// Set keeps value for the next round.
func (g *gatherStore) Set(_ context.Context, key string, value []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return err
	}
	v := append([]byte(nil), value...)
	g.kv[key], g.pending[key] = v, v
	return nil
}

// Get returns key's value, running a round if it is not known yet.
func (g *gatherStore) Get(ctx context.Context, key string) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.wait(ctx, key); err != nil {
		return nil, err
	}
	return append([]byte(nil), g.kv[key]...), nil
}

// Wait returns once every key is known, running a round if needed.
func (g *gatherStore) Wait(ctx context.Context, keys ...string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wait(ctx, keys...)
}

func (g *gatherStore) wait(ctx context.Context, keys ...string) error {
	if err := g.usable(); err != nil {
		return err
	}
	missing := func() string {
		for _, k := range keys {
			if _, ok := g.kv[k]; !ok {
				return k
			}
		}
		return ""
	}
	if missing() == "" {
		return nil
	}
	if err := g.round(ctx); err != nil {
		return err
	}
	if k := missing(); k != "" {
		return backend.Errorf(backend.CodeInternal, "intranode bootstrap: no rank published %q in round %d", k, g.rounds)
	}
	return nil
}

// Check reports whether every key is known, without a round.
func (g *gatherStore) Check(_ context.Context, keys ...string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return false, err
	}
	for _, k := range keys {
		if _, ok := g.kv[k]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// Add adds delta to a local counter.
func (g *gatherStore) Add(_ context.Context, key string, delta int64) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(string(g.kv[key]), 10, 64)
	n += delta
	g.kv[key] = []byte(strconv.FormatInt(n, 10))
	return n, nil
}

// CompareAndSet swaps a local value.
func (g *gatherStore) CompareAndSet(_ context.Context, key string, expected, desired []byte) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return nil, err
	}
	if string(g.kv[key]) == string(expected) {
		g.kv[key] = append([]byte(nil), desired...)
	}
	return append([]byte(nil), g.kv[key]...), nil
}

// Delete removes a local key.
func (g *gatherStore) Delete(_ context.Context, key string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usable(); err != nil {
		return false, err
	}
	_, ok := g.kv[key]
	delete(g.kv, key)
	delete(g.pending, key)
	return ok, nil
}

// Close drops the keys.
func (g *gatherStore) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.kv, g.pending = nil, nil
	return nil
}
