package collective

import (
	"context"
	"errors"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/closing"
)

// lane is a side stream of the copy path (moveCopy) and the event it
// records when its copy is done, for the caller's stream to wait for.
type lane struct {
	s    backend.Stream
	done backend.Event
}

// openLanes makes sure the comm has k lanes and both fork events; the
// caller holds c.mu.
func (c *Comm) openLanes(ctx context.Context, k int) error {
	for i := range c.forks {
		if c.forks[i] == nil {
			ev, err := c.dev.NewEvent(ctx, false)
			if err != nil {
				return err
			}
			c.forks[i] = ev
		}
	}
	for len(c.lanes) < k {
		s, err := c.dev.NewStream(ctx)
		if err != nil {
			return err
		}
		done, err := c.dev.NewEvent(ctx, false)
		if err != nil {
			return errors.Join(err, s.Close())
		}
		c.lanes = append(c.lanes, lane{s: s, done: done})
	}
	return nil
}

// copyOnLane enqueues a copy of n bytes from src to dst on lane i, after
// fork event f, which the caller has recorded on its stream, and records
// the lane's done event after it; the caller holds c.mu.
func (c *Comm) copyOnLane(i, f int, dst, src backend.DevicePtr, n int) error {
	l := c.lanes[i]
	if err := l.s.WaitEvent(c.forks[f]); err != nil {
		return err
	}
	if err := l.s.CopyAsync(dst, src, n); err != nil {
		return err
	}
	return l.s.Record(l.done)
}

// closeLanes releases the lanes and the fork events, appending their
// errors to errs.
func (c *Comm) closeLanes(errs []error) []error {
	for i := range c.lanes {
		errs = closing.Field(errs, &c.lanes[i].done)
		errs = closing.Field(errs, &c.lanes[i].s)
	}
	c.lanes = nil
	for i := range c.forks {
		errs = closing.Field(errs, &c.forks[i])
	}
	return errs
}
