package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

// TestTCPExpiredCallKeepsConnection checks that a call made with a context
// that has already ended fails alone: nothing was written, so the
// connection stays good for the calls after it. (A rank whose operation
// timed out still cleans up through the same client.)
func TestTCPExpiredCallKeepsConnection(t *testing.T) {
	srv := newServer(t)
	c := dial(t, srv.Addr())
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for range 50 { // the slot and the deadline race inside the call
		_, err := c.Add(expired, "n", 1)
		require.ErrorIs(t, err, backend.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, c.Set(cancelled, "k", nil), backend.ErrTimeout)
	}
	ctx, cancel3 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel3()
	require.NoError(t, c.Set(ctx, "k", []byte("v")), "the connection survived")
	n, err := c.Add(ctx, "n", 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "no expired Add reached the server")
	require.Empty(t, c.slots, "every slot was given back")
}
