package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric"
)

// Call failures, for errors.Is.
var (
	// ErrMismatch: ranks made different collective calls (collective, count, dtype, op, root,
	// algorithm or position in the sequence). Every rank of the call gets
	// it; the message names the ranks whose calls differ from this rank's.
	ErrMismatch = errors.New("collective: ranks made different collective calls")
	// ErrCommFailed: an earlier call of the comm failed (a timeout, a
	// mismatch, rejected arguments), which leaves the ranks' signal counters
	// out of step; close the comm and create a new one.
	ErrCommFailed = errors.New("collective: comm failed earlier; close it and create a new one")
)

// callState numbers a comm's kernel launches and keeps the failure that
// ended it. Guarded by Comm.mu.
type callState struct {
	seq    uint32
	failed error
}

// next returns the Call of the next kernel launch, whose Info is info
// (kernels.CallTagOf).
func (s *callState) next(info uint32, count int) uint64 {
	s.seq++
	if s.seq == 0 { // 0 would read as "no call yet" in a record
		s.seq = 1
	}
	return kernels.CallTagOf(s.seq, info, uint64(count))
}

// recordTimeout bounds reading the ranks' call records after a failure.
const recordTimeout = 5 * time.Second

// CheckStatus reads and clears the comm's kernel status word, turning a
// kernel-reported failure into an error: ErrMismatch naming the ranks whose
// calls differ, or a timeout (backend.ErrTimeout) naming the rank that did
// not arrive. Synchronize the stream first. After a failure the comm
// refuses further all-reduces with ErrCommFailed.
func (c *Comm) CheckStatus() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == nil {
		return ErrNotInitialized
	}
	w := symmetric.TakeStatus(c.status.Bytes())
	if w == 0 {
		return nil
	}
	what := fmt.Sprintf("collective all-reduce (rank %d)", c.rank)
	err := symmetric.StatusWordError(w, what)
	if code, peer, _ := kernels.DecodeStatus(w); code == kernels.StatusMismatch || code == kernels.StatusTimeout {
		if merr := c.mismatch(code, peer); merr != nil {
			err = merr
		}
	}
	if c.calls.failed == nil {
		c.calls.failed = err
	}
	return err
}

// mismatch reads every rank's call record and, when the calls differ,
// returns ErrMismatch naming the ranks; nil when they do not (the failure
// was a late or dead rank) or the records cannot be read. A rank differs
// when its record is of the same call with other parameters, or of a later
// call: after a timeout, such a rank was not late but elsewhere. Caller
// holds c.mu.
func (c *Comm) mismatch(code, peer int) error {
	recs, err := c.readRecords(code == kernels.StatusMismatch)
	if err != nil {
		c.log.Debug("reading call records failed", "err", err)
		if code == kernels.StatusMismatch {
			return fmt.Errorf("%w: rank %d sees ranks [%d] differ from its own call (records unreadable: %v)", ErrMismatch, c.rank, peer, err)
		}
		return nil
	}
	differ := c.differ(recs, true)
	if len(differ) == 0 {
		if code == kernels.StatusTimeout {
			return nil
		}
		differ = []int{peer}
	}
	return mismatchError(c.rank, recs, differ)
}

// differ returns the ranks whose record differs from this rank's: of the
// same call with other parameters, or with later, of a later call. (A
// record of an earlier call is a rank not there yet, not a different
// call.)
func (c *Comm) differ(recs []kernels.Record, later bool) []int {
	mine := recs[c.rank]
	var differ []int
	for r, rec := range recs {
		if r == c.rank || rec == mine {
			continue
		}
		if d := int32(rec.Seq() - mine.Seq()); d == 0 || (later && d > 0) {
			differ = append(differ, r)
		}
	}
	return differ
}

// mismatchError is ErrMismatch as rank sees it: the ranks that differ, and
// every rank's call.
func mismatchError(rank int, recs []kernels.Record, differ []int) error {
	calls := make([]string, len(recs))
	for r, rec := range recs {
		calls[r] = fmt.Sprintf("rank %d %v", r, rec)
	}
	return fmt.Errorf("%w: rank %d sees ranks %v differ from its own call; %s", ErrMismatch, rank, differ,
		strings.Join(calls, "; "))
}

// nameLate adds to err, the end of a wait on the caller's stream at the
// caller's deadline, the ranks that had not started this rank's call: those
// whose call record is of an earlier call. The caller's deadline and the
// kernels' own timeout are the same instant, so a rank's wait on its stream
// may end before its kernel reports the rank it waited for; the records
// name it either way. A rank whose record is of this very call with other
// parameters made a different call: that is ErrMismatch, as the kernel
// would have reported (a kernel waiting on a path the other call never
// signals tells it only at its timeout). err is returned unchanged when
// no rank is behind or different, or the records cannot be read.
func (c *Comm) nameLate(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return err
	}
	recs, rerr := c.readRecords(false)
	if rerr != nil {
		c.log.Debug("reading call records failed", "err", rerr)
		return err
	}
	if differ := c.differ(recs, false); len(differ) > 0 {
		return fmt.Errorf("%w (%w)", mismatchError(c.rank, recs, differ), err)
	}
	mine := recs[c.rank]
	var late []string
	for r, rec := range recs {
		if int32(rec.Seq()-mine.Seq()) < 0 {
			late = append(late, fmt.Sprintf("rank %d (%v)", r, rec))
		}
	}
	if len(late) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s did not arrive in this rank's %v", err, strings.Join(late, ", "), mine)
}

// recordSettle is how long readRecords waits for ranks whose record is
// still of an earlier call: a rank a little behind has yet to start the
// call in question, and its record would name the wrong call.
const recordSettle = time.Second

// readRecords reads every rank's call record from its signal pad; with
// settle, again for up to recordSettle while some rank's record is of an
// earlier call than this rank's. (After a timeout such a rank is the late
// or dead one, and waiting for it would only delay the error.) Caller
// holds c.mu.
func (c *Comm) readRecords(settle bool) ([]kernels.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	recs := make([]kernels.Record, c.world)
	buf := make([]byte, kernels.RecordSize)
	start := time.Now()
	for {
		for r := range recs {
			if err := c.dev.CopyFromDevice(ctx, buf, c.mem.SignalPad(r).Add(kernels.RecordOffset)); err != nil {
				return nil, fmt.Errorf("rank %d's call record: %w", r, err)
			}
			recs[r] = kernels.DecodeRecord(buf)
		}
		behind := false
		for _, rec := range recs {
			behind = behind || int32(rec.Seq()-recs[c.rank].Seq()) < 0
		}
		if !settle || !behind || time.Since(start) > recordSettle {
			return recs, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// statusWord is the device address of the comm's kernel status word, 0
// before the rendezvous made it.
func (c *Comm) statusWord() backend.DevicePtr {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status == nil {
		return 0
	}
	return c.status.Ptr()
}
