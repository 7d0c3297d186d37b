package ipc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/intranode/intranode/backend"
)

// AllGatherFD exchanges one descriptor per rank across the group whose
// processes are pids (rank r is pids[r]; pids[rank] must be this channel's
// PID and every pid a peer, see SetPeers). Every rank sends fd to every
// other rank and receives theirs.
//
// The result is indexed by rank. Entry rank is fd itself, not a copy: the
// caller keeps owning it exactly as before. Every other entry is a new
// close-on-exec descriptor that the caller owns. On error no descriptor is
// returned and every one received is closed; a timeout error matches
// backend.ErrTimeout and names the ranks (and pids) whose descriptors did
// not arrive and those that could not be reached.
//
// Rounds that reuse a tag are matched in order; distinct tags per round
// make mistakes easier to see.
func (c *Channel) AllGatherFD(ctx context.Context, rank int, pids []int, tag string, fd int) ([]int, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if err := c.checkGroup("all-gather", rank, pids, tag); err != nil {
		return nil, err
	}
	if fd < 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "ipc: all-gather: descriptor %d is not valid", fd)
	}
	dsts := make([]int, 0, len(pids)-1)
	for r := range pids {
		if r != rank {
			dsts = append(dsts, r)
		}
	}
	op := fmt.Sprintf("ipc: all-gather %q (rank %d of %d)", tag, rank, len(pids))
	sendCtx, stopSends := context.WithCancelCause(ctx)
	defer stopSends(nil)
	wait := c.sendAll(sendCtx, stopSends, pids, dsts, tag, fd)

	out := make([]int, len(pids))
	for r := range out {
		out[r] = -1
	}
	var recvErr error
	var missing []int
	for _, r := range dsts {
		got, err := c.RecvFD(sendCtx, pids[r], tag)
		if err != nil {
			recvErr = err
			for _, m := range dsts {
				if m >= r && !c.queued(pids[m], tag) {
					missing = append(missing, m)
				}
			}
			break
		}
		out[r] = got
	}
	if recvErr != nil {
		stopSends(recvErr)
	}
	unsent := wait()
	if recvErr == nil && len(unsent) == 0 {
		out[rank] = fd
		return out, nil
	}
	closeFDs(out)
	return nil, c.groupError(ctx, op, pids, missing, unsent, recvErr)
}

// BroadcastFD hands the descriptor of rank root to every rank of the group
// whose processes are pids (same rules as AllGatherFD). On root it sends fd
// and returns fd itself; elsewhere fd is ignored (pass -1) and the result is
// a new close-on-exec descriptor the caller owns. A timeout error matches
// backend.ErrTimeout and names the ranks involved.
func (c *Channel) BroadcastFD(ctx context.Context, rank, root int, pids []int, tag string, fd int) (int, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if root < 0 || root >= len(pids) {
		return -1, backend.Errorf(backend.CodeInvalidArgument, "ipc: broadcast root %d out of range for %d ranks", root, len(pids))
	}
	if err := c.checkGroup("broadcast", rank, pids, tag); err != nil {
		return -1, err
	}
	if rank == root && fd < 0 {
		return -1, backend.Errorf(backend.CodeInvalidArgument, "ipc: broadcast: root descriptor %d is not valid", fd)
	}
	op := fmt.Sprintf("ipc: broadcast %q from rank %d (rank %d of %d)", tag, root, rank, len(pids))
	if rank != root {
		got, err := c.RecvFD(ctx, pids[root], tag)
		if err != nil {
			return -1, c.groupError(ctx, op, pids, []int{root}, nil, err)
		}
		return got, nil
	}
	dsts := make([]int, 0, len(pids)-1)
	for r := range pids {
		if r != rank {
			dsts = append(dsts, r)
		}
	}
	sendCtx, stopSends := context.WithCancelCause(ctx)
	defer stopSends(nil)
	if unsent := c.sendAll(sendCtx, stopSends, pids, dsts, tag, fd)(); len(unsent) > 0 {
		return -1, c.groupError(ctx, op, pids, nil, unsent, nil)
	}
	return fd, nil
}

// checkGroup validates the arguments every collective shares.
func (c *Channel) checkGroup(op string, rank int, pids []int, tag string) error {
	if rank < 0 || rank >= len(pids) {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: %s: rank %d out of range for %d ranks", op, rank, len(pids))
	}
	if pids[rank] != c.pid {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: %s: rank %d is pid %d, but this channel is pid %d", op, rank, pids[rank], c.pid)
	}
	if len(tag) > MaxTagLen {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: %s: tag of %d bytes exceeds %d", op, len(tag), MaxTagLen)
	}
	seen := make(map[int]int, len(pids))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return backend.Errorf(backend.CodeClosed, "ipc: channel %s is closed", c.name)
	}
	for r, p := range pids {
		if prev, dup := seen[p]; dup {
			return backend.Errorf(backend.CodeInvalidArgument, "ipc: %s: ranks %d and %d are both pid %d", op, prev, r, p)
		}
		seen[p] = r
		if !c.peers[p] {
			return backend.Errorf(backend.CodeInvalidArgument, "ipc: %s: pid %d (rank %d) is not a peer of this channel (see SetPeers)", op, p, r)
		}
	}
	return nil
}

// sendFailure is one destination rank that a collective could not reach.
type sendFailure struct {
	rank int
	err  error
}

// sendAll sends fd to every rank in dsts concurrently, so that one absent
// peer does not hold up the others. A failure other than running out of
// time cancels the rest through stop. The returned function waits for the
// sends and reports the ranks not reached.
func (c *Channel) sendAll(ctx context.Context, stop context.CancelCauseFunc, pids, dsts []int, tag string, fd int) func() []sendFailure {
	errs := make([]error, len(dsts))
	var wg sync.WaitGroup
	for i, r := range dsts {
		wg.Go(func() {
			errs[i] = c.send(ctx, pids[r], tag, fd)
			if errs[i] != nil && !errors.Is(errs[i], backend.ErrTimeout) {
				stop(errs[i])
			}
		})
	}
	return func() []sendFailure {
		wg.Wait()
		var failed []sendFailure
		for i, err := range errs {
			if err != nil {
				failed = append(failed, sendFailure{dsts[i], err})
			}
		}
		return failed
	}
}

// groupError turns what went wrong in a collective into one error. The
// first hard failure (not a timeout) wins; otherwise it is a timeout error
// naming every rank that was missing or unreachable.
func (c *Channel) groupError(ctx context.Context, op string, pids, missing []int, unsent []sendFailure, recvErr error) error {
	for _, f := range unsent {
		if !errors.Is(f.err, backend.ErrTimeout) {
			return fmt.Errorf("%s: rank %d (pid %d): %w", op, f.rank, pids[f.rank], f.err)
		}
	}
	if recvErr != nil && !errors.Is(recvErr, backend.ErrTimeout) {
		return fmt.Errorf("%s: %w", op, recvErr)
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "no descriptor arrived from "+rankList(pids, missing))
	}
	if len(unsent) > 0 {
		ranks := make([]int, len(unsent))
		for i, f := range unsent {
			ranks[i] = f.rank
		}
		parts = append(parts, "could not reach "+rankList(pids, ranks)+" (socket not bound or queue full)")
	}
	cause := ctx.Err()
	if cause == nil {
		cause = recvErr
	}
	return backend.Wrap(backend.CodeTimeout, cause, op+": "+strings.Join(parts, "; "))
}

func rankList(pids, ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprintf("rank %d (pid %d)", r, pids[r])
	}
	return strings.Join(s, ", ")
}
