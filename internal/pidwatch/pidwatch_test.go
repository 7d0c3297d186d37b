package pidwatch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

// sleeper starts a process that lives until killed.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// ended waits up to 10 s for ctx to end and fails the test if it does not.
func ended(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

// stillRunning fails the test if ctx ends within d.
func stillRunning(t *testing.T, ctx context.Context, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("%s: %v", what, context.Cause(ctx))
	case <-time.After(d):
	}
}

// TestWatchNamesTheExitedPeer: a peer killed while watched ends the
// context at once with an error naming its rank, before it is reaped
// (a zombie) as after.
func TestWatchNamesTheExitedPeer(t *testing.T) {
	if Namespace() == "" {
		t.Skip("no /proc/self/ns/pid")
	}
	for _, reap := range []bool{false, true} {
		a, b := sleeper(t), sleeper(t)
		ns := Namespace()
		ctx, stop := Watch(t.Context(), []Peer{{Rank: 1, PID: a.Process.Pid, Namespace: ns}, {Rank: 2, PID: b.Process.Pid, Namespace: ns}}, nil)
		require.NoError(t, b.Process.Kill())
		if reap {
			_, _ = b.Process.Wait()
		}
		ended(t, ctx, "the watch did not notice the exit")
		cause := context.Cause(ctx)
		require.ErrorIs(t, cause, backend.ErrPeerFailed)
		require.ErrorContains(t, cause, "rank 2 (process ")
		err := Cause(ctx, backend.Wrap(backend.CodeTimeout, ctx.Err(), "waiting"))
		require.ErrorIs(t, err, backend.ErrPeerFailed)
		require.NotErrorIs(t, err, backend.ErrTimeout, "a peer failure, not a timeout")
		require.ErrorContains(t, err, "waiting")
		stop()
	}
}

// TestWatchIgnores: this process, peers in another namespace and a live
// peer end nothing; stop returns and ends the context.
func TestWatchIgnores(t *testing.T) {
	a := sleeper(t)
	ctx, stop := Watch(t.Context(), []Peer{
		{Rank: 0, PID: os.Getpid(), Namespace: Namespace()},
		{Rank: 1, PID: 1 << 30, Namespace: "pid:[1]"}, // another namespace: its number names nothing here
		{Rank: 2, PID: a.Process.Pid, Namespace: Namespace()},
	}, nil)
	stillRunning(t, ctx, 300*time.Millisecond, "ended with no peer gone")
	stop()
	require.ErrorIs(t, ctx.Err(), context.Canceled)
	require.NoError(t, Cause(ctx, nil))
	require.Equal(t, context.Canceled, Cause(ctx, context.Canceled))
}

// TestWatchGonePeer: a peer that no longer exists when the watch starts
// counts as exited.
func TestWatchGonePeer(t *testing.T) {
	if Namespace() == "" {
		t.Skip("no /proc/self/ns/pid")
	}
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	ctx, stop := Watch(t.Context(), []Peer{{Rank: 3, PID: cmd.Process.Pid, Namespace: Namespace()}}, nil)
	defer stop()
	ended(t, ctx, "a reaped peer was not reported")
	require.ErrorContains(t, context.Cause(ctx), "rank 3 (process")
}

// TestWatchIgnoresFinishedPeers: a peer that had finished with this rank
// before it exited (a rank that got the group's verdict and left) ends
// nothing; the other peers are still watched.
func TestWatchIgnoresFinishedPeers(t *testing.T) {
	if Namespace() == "" {
		t.Skip("no /proc/self/ns/pid")
	}
	a, b := sleeper(t), sleeper(t)
	ns := Namespace()
	ctx, stop := Watch(t.Context(), []Peer{{Rank: 1, PID: a.Process.Pid, Namespace: ns}, {Rank: 2, PID: b.Process.Pid, Namespace: ns}},
		func(rank int) bool { return rank == 1 })
	defer stop()
	require.NoError(t, a.Process.Kill())
	stillRunning(t, ctx, 300*time.Millisecond, "a finished peer's exit ended the watch")
	require.NoError(t, b.Process.Kill())
	ended(t, ctx, "the unfinished peer's exit was not noticed")
	require.ErrorContains(t, context.Cause(ctx), "rank 2 (process")
}

// TestCauseKeepsVerdicts: after a peer's exit, an error that is not what
// the cancellation did (a verdict every rank reached) is kept as it is.
func TestCauseKeepsVerdicts(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(Exited(Peer{Rank: 1, PID: 7}))
	verdict := backend.Errorf(backend.CodeNotSupported, "topology not usable")
	require.Equal(t, verdict, Cause(ctx, verdict))
	require.ErrorIs(t, Cause(ctx, fmt.Errorf("waiting: %w", context.Canceled)), backend.ErrPeerFailed)
	require.ErrorIs(t, Cause(ctx, backend.Errorf(backend.CodeTimeout, "store get")), backend.ErrPeerFailed)
}

// BenchmarkWatchStop times stopping a watch of one live peer whose
// goroutine is already polling, which every rendezvous in processes pays
// when it ends: stop must not wait for the poll to time out.
func BenchmarkWatchStop(b *testing.B) {
	if Namespace() == "" {
		b.Skip("no /proc/self/ns/pid")
	}
	peer := []Peer{{Rank: 1, PID: os.Getppid(), Namespace: Namespace()}}
	for range b.N {
		b.StopTimer()
		_, stop := Watch(b.Context(), peer, nil)
		time.Sleep(2 * time.Millisecond) // the watch is in its poll by now
		b.StartTimer()
		stop()
	}
}
