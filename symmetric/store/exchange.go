package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
)

// checkTimeout bounds the look, after a timeout, at which other ranks are
// missing too; the caller's own deadline has passed by then.
const checkTimeout = time.Second

// Exchange runs collectives over a Store among the ranks of a group, as
// PyTorch's StoreExchange does: round n of the exchange writes this rank's
// contribution to "<prefix>/<n>/<rank>" and reads every rank's key of round
// n. Every call (AllGather, Barrier, Broadcast) is one round, so repeated
// exchanges never read a stale value.
//
// Rounds clean up after themselves: once a rank has read every key of round
// n it deletes its own key of round n-1, which is safe because every rank
// finished reading round n-1 before writing round n. A long-running group
// therefore holds at most one key per rank (plus, transiently, one more)
// under its prefix, and none once every rank has closed its Exchange.
//
// Round numbers restart at 0 for every Exchange, so a prefix must not be
// reused on a store that still holds keys from an earlier group under it
// (one that did not close); give each group its own prefix.
//
// All ranks must make the same calls in the same order. An Exchange is safe
// for concurrent use, but its calls are serialised. After an error the
// group is out of step and should be torn down.
type Exchange struct {
	s           Store
	prefix      string
	rank, world int
	opts        options

	mu     sync.Mutex
	seq    uint64 // the next round
	closed bool
}

// NewExchange returns rank's end of the exchange among world ranks under
// prefix. It honours WithTimeout (bounding each whole call) and WithLogger.
func NewExchange(s Store, prefix string, rank, world int, opts ...Option) (*Exchange, error) {
	switch {
	case s == nil:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store exchange: nil store")
	case prefix == "":
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store exchange: empty prefix")
	case world < 1:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store exchange %q: world size %d < 1", prefix, world)
	case rank < 0 || rank >= world:
		return nil, backend.Errorf(backend.CodeInvalidArgument, "store exchange %q: rank %d outside [0, %d)", prefix, rank, world)
	}
	return &Exchange{s: s, prefix: prefix, rank: rank, world: world, opts: buildOptions(opts)}, nil
}

// Rank returns this end's rank.
func (ex *Exchange) Rank() int { return ex.rank }

// World returns the number of ranks.
func (ex *Exchange) World() int { return ex.world }

func (ex *Exchange) key(seq uint64, rank int) string {
	return ex.prefix + "/" + strconv.FormatUint(seq, 10) + "/" + strconv.Itoa(rank)
}

// doneKey counts the ranks that closed after round seq.
func (ex *Exchange) doneKey(seq uint64) string {
	return ex.prefix + "/" + strconv.FormatUint(seq, 10) + "/done"
}

// AllGather publishes data and returns every rank's data, indexed by rank.
func (ex *Exchange) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed {
		return nil, backend.Errorf(backend.CodeClosed, "store exchange %q: exchange is closed", ex.prefix)
	}
	ctx, cancel := withDeadline(ctx, ex.opts.timeout)
	defer cancel()
	seq := ex.seq
	ex.seq++

	if err := ex.s.Set(ctx, ex.key(seq, ex.rank), data); err != nil {
		return nil, backend.Wrap(backend.CodeOf(err), err,
			fmt.Sprintf("store exchange %q seq %d: publish rank %d", ex.prefix, seq, ex.rank))
	}
	out := make([][]byte, ex.world)
	out[ex.rank] = cloneBytes(data)
	for r := range ex.world {
		if r == ex.rank {
			continue
		}
		v, err := ex.s.Get(ctx, ex.key(seq, r))
		if err != nil {
			if errors.Is(err, backend.ErrTimeout) {
				return nil, backend.Wrap(backend.CodeTimeout, err, fmt.Sprintf("store exchange %q seq %d: %s did not arrive",
					ex.prefix, seq, ranksText(ex.missing(ctx, seq, r))))
			}
			return nil, backend.Wrap(backend.CodeOf(err), err,
				fmt.Sprintf("store exchange %q seq %d: read rank %d", ex.prefix, seq, r))
		}
		out[r] = v
	}
	if seq > 0 {
		if _, err := ex.s.Delete(ctx, ex.key(seq-1, ex.rank)); err != nil {
			// Only a leaked key; the round itself succeeded.
			ex.opts.logger.Warn("store exchange: cleanup failed", "prefix", ex.prefix, "seq", seq-1, "rank", ex.rank, "err", err)
		}
	}
	return out, nil
}

// missing lists the ranks, from first on, whose key of round seq is not
// set: first itself (it timed out) and any later one a quick check finds
// absent.
func (ex *Exchange) missing(ctx context.Context, seq uint64, first int) []int {
	ranks := []int{first}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	for r := first + 1; r < ex.world; r++ {
		if r == ex.rank {
			continue
		}
		if ok, err := ex.s.Check(ctx, ex.key(seq, r)); err == nil && !ok {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

func ranksText(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(s, ", ")
}

// Barrier returns once every rank has entered it.
func (ex *Exchange) Barrier(ctx context.Context) error {
	_, err := ex.AllGather(ctx, nil)
	return err
}

// Broadcast returns root's data on every rank; other ranks' data is
// ignored. Every rank takes part in the round, root included, so like a
// barrier it returns only once every rank has arrived.
func (ex *Exchange) Broadcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	if root < 0 || root >= ex.world {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"store exchange %q: broadcast root %d outside [0, %d)", ex.prefix, root, ex.world)
	}
	if ex.rank != root {
		data = nil
	}
	all, err := ex.AllGather(ctx, data)
	if err != nil {
		return nil, err
	}
	return all[root], nil
}

// Close retires the exchange. Its last round's keys cannot be deleted by
// the rank that wrote them, since a slower rank may still be reading; so
// every rank counts itself out of that round and the last one to do so
// deletes all of its keys. Closing twice is harmless; other calls after
// Close fail with an error matching backend.ErrClosed. The store stays open.
func (ex *Exchange) Close(ctx context.Context) error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed {
		return nil
	}
	ex.closed = true
	if ex.seq == 0 {
		return nil
	}
	ctx, cancel := withDeadline(ctx, ex.opts.timeout)
	defer cancel()
	last := ex.seq - 1
	n, err := ex.s.Add(ctx, ex.doneKey(last), 1)
	if err != nil {
		return backend.Wrap(backend.CodeOf(err), err, fmt.Sprintf("store exchange %q seq %d: close", ex.prefix, last))
	}
	if n < int64(ex.world) {
		return nil
	}
	keys := make([]string, 0, ex.world+1)
	for r := range ex.world {
		keys = append(keys, ex.key(last, r))
	}
	keys = append(keys, ex.doneKey(last))
	var errs []error
	for _, k := range keys {
		if _, err := ex.s.Delete(ctx, k); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return backend.Wrap(backend.CodeOf(errs[0]), err, fmt.Sprintf("store exchange %q seq %d: close", ex.prefix, last))
	}
	return nil
}

// AllGatherValue all-gathers one fixed-size value per rank (a number, an
// array or a struct of them, as encoding/binary defines fixed size) and
// returns them indexed by rank. Types without a fixed size (slices,
// pointers, strings, maps, int, uint) are refused with an error matching
// backend.ErrInvalidArgument.
func AllGatherValue[T any](ctx context.Context, ex *Exchange, v T) ([]T, error) {
	size, err := fixedSize[T]()
	if err != nil {
		return nil, err
	}
	payload, err := binary.Append(make([]byte, 0, size), binary.LittleEndian, v)
	if err != nil {
		return nil, backend.Wrap(backend.CodeInvalidArgument, err, fmt.Sprintf("store exchange: encode %T", v))
	}
	all, err := ex.AllGather(ctx, payload)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(all))
	for r, b := range all {
		if len(b) != size {
			return nil, backend.Errorf(backend.CodeInvalidArgument,
				"store exchange %q: rank %d sent %d bytes, want %d for %T", ex.prefix, r, len(b), size, v)
		}
		if _, err := binary.Decode(b, binary.LittleEndian, &out[r]); err != nil {
			return nil, backend.Wrap(backend.CodeInvalidArgument, err,
				fmt.Sprintf("store exchange %q: decode rank %d's %T", ex.prefix, r, v))
		}
	}
	return out, nil
}

// fixedSize returns T's encoded size, refusing types whose size depends on
// the value.
func fixedSize[T any]() (int, error) {
	t := reflect.TypeFor[T]()
	var zero T
	n := -1
	switch t.Kind() {
	case reflect.Slice, reflect.Pointer, reflect.Interface:
	default:
		n = binary.Size(zero)
	}
	if n < 0 {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "store exchange: %v has no fixed size", t)
	}
	return n, nil
}
