package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func TestMemMaxKeys(t *testing.T) {
	ctx := context.Background()
	m := NewMem(WithMaxKeys(2))
	defer m.Close()
	require.NoError(t, m.Set(ctx, "a", nil))
	require.NoError(t, m.Set(ctx, "b", nil))
	tests := []struct {
		name string
		call func() error
		full bool
	}{
		{"overwrite existing", func() error { return m.Set(ctx, "a", []byte("x")) }, false},
		{"set new", func() error { return m.Set(ctx, "c", nil) }, true},
		{"add new", func() error { _, err := m.Add(ctx, "c", 1); return err }, true},
		{"compare-and-set new", func() error { _, err := m.CompareAndSet(ctx, "c", nil, []byte("x")); return err }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !tc.full {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, backend.ErrOutOfMemory)
			require.ErrorContains(t, err, "store is full")
		})
	}
	_, err := m.Delete(ctx, "b")
	require.NoError(t, err)
	require.NoError(t, m.Set(ctx, "c", nil), "deleting makes room")
}

func TestMemWaitersAreReleased(t *testing.T) {
	m := NewMem()
	defer m.Close()
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, err := m.Get(ctx, fmt.Sprintf("k%d", i))
		cancel()
		require.ErrorIs(t, err, backend.ErrTimeout)
	}
	require.Zero(t, m.waiting(), "timed-out waiters must not leave entries behind")

	// Waiters woken by a Set leave nothing either.
	done := make(chan error)
	for range 3 {
		go func() { _, err := m.Get(context.Background(), "shared"); done <- err }()
	}
	require.Eventually(t, func() bool { return m.waiting() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, m.Set(context.Background(), "shared", []byte("v")))
	for range 3 {
		require.NoError(t, <-done)
	}
	require.Zero(t, m.waiting())
}

func TestMemGetAfterDeleteKeepsWaiting(t *testing.T) {
	m := NewMem()
	defer m.Close()
	ctx := context.Background()
	require.NoError(t, m.Set(ctx, "k", []byte("1")))
	_, err := m.Delete(ctx, "k")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = m.Get(short, "k")
	require.ErrorIs(t, err, backend.ErrTimeout)
}

func TestMemKeys(t *testing.T) {
	m := NewMem()
	defer m.Close()
	ctx := context.Background()
	for _, k := range []string{"p/2", "p/1", "q/1", "p"} {
		require.NoError(t, m.Set(ctx, k, nil))
	}
	require.Equal(t, 4, m.Len())
	require.Equal(t, []string{"p/1", "p/2"}, m.Keys("p/"))
	require.Equal(t, []string{"p", "p/1", "p/2", "q/1"}, m.Keys(""))
}

func TestDefaultTimeoutApplies(t *testing.T) {
	m := NewMem(WithTimeout(5 * time.Millisecond))
	defer m.Close()
	_, err := m.Get(context.Background(), "never")
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
