package ipc

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/internal/launch"
)

// fakePIDBase keeps the pids of in-process channels (WithPID) clear of real
// ones: no kernel hands out pids this large.
const fakePIDBase = 1 << 30

// memfdWith returns a close-on-exec memfd holding content, for the caller
// to close.
func memfdWith(t *testing.T, content string) int {
	t.Helper()
	fd, err := unix.MemfdCreate("ipc-test", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	_, err = unix.Pwrite(fd, []byte(content), 0)
	require.NoError(t, err)
	return fd
}

// listenAs opens a channel for the fake pid pid with nonce, closed when
// the test ends.
func listenAs(t *testing.T, nonce string, pid int) *Channel {
	t.Helper()
	ch, err := Listen(nonce, WithPID(pid))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// readFD returns what a memfd written by memfdWith holds.
func readFD(t *testing.T, fd int) string {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	buf := make([]byte, st.Size)
	n, err := unix.Pread(fd, buf, 0)
	require.NoError(t, err)
	return string(buf[:n])
}

// isCloseOnExec reports whether fd has FD_CLOEXEC set.
func isCloseOnExec(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	require.NoError(t, err)
	return flags&unix.FD_CLOEXEC != 0
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// dropLog is a slog handler that passes the reasons of dropped messages to
// a test. It never blocks the channel's receive loop.
type dropLog struct{ reasons chan string }

func newDropLog() *dropLog { return &dropLog{reasons: make(chan string, 64)} }

func (d *dropLog) Enabled(context.Context, slog.Level) bool { return true }

func (d *dropLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "ipc: dropped message" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			select {
			case d.reasons <- a.Value.String():
			default:
			}
			return false
		}
		return true
	})
	return nil
}

func (d *dropLog) WithAttrs([]slog.Attr) slog.Handler { return d }
func (d *dropLog) WithGroup(string) slog.Handler      { return d }

func (d *dropLog) logger() *slog.Logger { return slog.New(d) }

// next waits for the next drop and returns its reason.
func (d *dropLog) next(t *testing.T) string {
	t.Helper()
	select {
	case r := <-d.reasons:
		return r
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no message was dropped")
		return ""
	}
}

// newGroup opens n channels in this process, named as fake pids, that all
// know each other as peers.
func newGroup(t *testing.T, n int, opts ...Option) ([]*Channel, []int) {
	t.Helper()
	nonce, err := NewNonce()
	require.NoError(t, err)
	pids := make([]int, n)
	for i := range pids {
		pids[i] = fakePIDBase + i
	}
	chs := make([]*Channel, n)
	for i := range chs {
		ch, err := Listen(nonce, append([]Option{WithPID(pids[i])}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ch.Close() })
		ch.SetPeers(pids)
		chs[i] = ch
	}
	return chs, pids
}

// testCtx is a context for a step that should succeed; its deadline only
// turns a hang into a failure.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// shortCtx is a context for a step that is meant to time out.
func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// TestMain keeps the helper processes this package starts from sleeping a
// second at exit in race builds.
func TestMain(m *testing.M) {
	launch.QuietRaceExit()
	os.Exit(m.Run())
}
