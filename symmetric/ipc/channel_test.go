package ipc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

func TestNewNonce(t *testing.T) {
	a, err := NewNonce()
	require.NoError(t, err)
	b, err := NewNonce()
	require.NoError(t, err)
	require.Len(t, a, 32)
	require.Regexp(t, "^[0-9a-f]{32}$", a)
	require.NotEqual(t, a, b)
}

func TestListenNamesSocketFromPID(t *testing.T) {
	nonce, err := NewNonce()
	require.NoError(t, err)
	ch, err := Listen(nonce)
	require.NoError(t, err)
	defer ch.Close()
	require.Equal(t, "@intranode-"+nonce+"-"+fmt.Sprint(os.Getpid()), ch.Name())
	require.Equal(t, SocketName(nonce, os.Getpid()), ch.Name())
	require.Equal(t, os.Getpid(), ch.PID())
}

func TestListenNameTaken(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
	}{
		{"process pid", nil},
		{"overridden pid", []Option{WithPID(fakePIDBase + 7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nonce, err := NewNonce()
			require.NoError(t, err)
			first, err := Listen(nonce, tt.opts...)
			require.NoError(t, err)
			defer first.Close()

			second, err := Listen(nonce, tt.opts...)
			require.Nil(t, second)
			require.ErrorIs(t, err, backend.ErrUnavailable)
			require.ErrorContains(t, err, "IPC socket name")
			require.ErrorContains(t, err, "is taken")
			require.ErrorContains(t, err, first.Name())

			// The name frees as soon as its holder closes: nothing is left
			// behind in a file system.
			require.NoError(t, first.Close())
			again, err := Listen(nonce, tt.opts...)
			require.NoError(t, err)
			require.NoError(t, again.Close())
		})
	}
}

func TestListenRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name  string
		nonce string
		opts  []Option
	}{
		{"empty nonce", "", nil},
		{"long nonce", strings.Repeat("a", maxNonceLen+1), nil},
		{"slash in nonce", "a/b", nil},
		{"NUL in nonce", "a\x00b", nil},
		{"zero pid", "abc", []Option{WithPID(0)}},
		{"zero timeout", "abc", []Option{WithTimeout(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Listen(tt.nonce, tt.opts...)
			require.Nil(t, ch)
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
		})
	}
}

func TestSendRecvMatchesSenderAndTag(t *testing.T) {
	type msg struct {
		from    int // rank
		tag     string
		content string
	}
	tests := []struct {
		name  string
		sends []msg // in sending order
		recvs []msg // in receiving order
	}{
		{
			name:  "one message",
			sends: []msg{{1, "a", "x"}},
			recvs: []msg{{1, "a", "x"}},
		},
		{
			name:  "tags out of order",
			sends: []msg{{1, "round-2", "second"}, {1, "round-1", "first"}},
			recvs: []msg{{1, "round-1", "first"}, {1, "round-2", "second"}},
		},
		{
			name:  "senders out of order",
			sends: []msg{{2, "t", "from 2"}, {1, "t", "from 1"}},
			recvs: []msg{{1, "t", "from 1"}, {2, "t", "from 2"}},
		},
		{
			name:  "same sender and tag in order",
			sends: []msg{{1, "t", "one"}, {1, "t", "two"}, {2, "t", "three"}},
			recvs: []msg{{2, "t", "three"}, {1, "t", "one"}, {1, "t", "two"}},
		},
		{
			name:  "empty tag",
			sends: []msg{{2, "", "untagged"}},
			recvs: []msg{{2, "", "untagged"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chs, pids := newGroup(t, 3)
			ctx := testCtx(t)
			for _, m := range tt.sends {
				fd := memfdWith(t, m.content)
				require.NoError(t, chs[m.from].SendFD(ctx, pids[0], m.tag, fd))
				require.NoError(t, unix.Close(fd)) // the receiver holds its own copy
			}
			for _, m := range tt.recvs {
				fd, err := chs[0].RecvFD(ctx, pids[m.from], m.tag)
				require.NoError(t, err)
				require.Equal(t, m.content, readFD(t, fd))
				require.True(t, isCloseOnExec(t, fd), "received descriptors must be close-on-exec")
				require.NoError(t, unix.Close(fd))
			}
		})
	}
}

func TestSendRetriesUntilReceiverBinds(t *testing.T) {
	nonce, err := NewNonce()
	require.NoError(t, err)
	pids := []int{fakePIDBase, fakePIDBase + 1}
	sender := listenAs(t, nonce, pids[0])
	sender.SetPeers(pids)
	fd := memfdWith(t, "late")
	defer unix.Close(fd)

	ctx := testCtx(t)
	sent := make(chan error, 1)
	go func() { sent <- sender.SendFD(ctx, pids[1], "t", fd) }()

	receiver := listenAs(t, nonce, pids[1])
	receiver.SetPeers(pids)
	got, err := receiver.RecvFD(ctx, pids[0], "t")
	require.NoError(t, err)
	defer unix.Close(got)
	require.Equal(t, "late", readFD(t, got))
	require.NoError(t, <-sent)
}

func TestMessagesBeforeSetPeersWaitInKernel(t *testing.T) {
	nonce, err := NewNonce()
	require.NoError(t, err)
	pids := []int{fakePIDBase, fakePIDBase + 1}
	receiver := listenAs(t, nonce, pids[0])
	sender := listenAs(t, nonce, pids[1])
	sender.SetPeers(pids)

	ctx := testCtx(t)
	fd := memfdWith(t, "early")
	require.NoError(t, sender.SendFD(ctx, pids[0], "t", fd))
	require.NoError(t, unix.Close(fd))

	receiver.SetPeers(pids)
	got, err := receiver.RecvFD(ctx, pids[1], "t")
	require.NoError(t, err)
	defer unix.Close(got)
	require.Equal(t, "early", readFD(t, got))
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name string
		call func(t *testing.T, chs []*Channel, pids []int) error
		want []string
	}{
		{
			name: "receive from silent peer",
			call: func(t *testing.T, chs []*Channel, pids []int) error {
				_, err := chs[0].RecvFD(shortCtx(t), pids[1], "weights")
				return err
			},
			want: []string{fmt.Sprintf("pid %d", fakePIDBase+1), `"weights"`},
		},
		{
			name: "receive without deadline uses the channel's timeout",
			call: func(t *testing.T, chs []*Channel, pids []int) error {
				_, err := chs[0].RecvFD(context.Background(), pids[1], "t")
				return err
			},
			want: []string{fmt.Sprintf("pid %d", fakePIDBase+1)},
		},
		{
			name: "send to peer that never binds",
			call: func(t *testing.T, chs []*Channel, pids []int) error {
				fd := memfdWith(t, "x")
				defer unix.Close(fd)
				chs[0].SetPeers(append(pids, fakePIDBase+99))
				return chs[0].SendFD(shortCtx(t), fakePIDBase+99, "t", fd)
			},
			want: []string{fmt.Sprintf("pid %d has not bound", fakePIDBase+99), "connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chs, pids := newGroup(t, 2, WithTimeout(100*time.Millisecond))
			err := tt.call(t, chs, pids)
			require.ErrorIs(t, err, backend.ErrTimeout)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestCloseUnblocksReceiver(t *testing.T) {
	chs, pids := newGroup(t, 2)
	errs := make(chan error, 1)
	go func() {
		_, err := chs[0].RecvFD(testCtx(t), pids[1], "t")
		errs <- err
	}()
	require.NoError(t, chs[0].Close())
	err := <-errs
	require.ErrorIs(t, err, backend.ErrClosed)
	require.False(t, errors.Is(err, backend.ErrTimeout))
}

func TestCallsAfterClose(t *testing.T) {
	chs, pids := newGroup(t, 2)
	require.NoError(t, chs[0].Close())
	require.NoError(t, chs[0].Close(), "Close is idempotent")
	fd := memfdWith(t, "x")
	defer unix.Close(fd)
	ctx := testCtx(t)

	tests := []struct {
		name string
		call func() error
	}{
		{"SendFD", func() error { return chs[0].SendFD(ctx, pids[1], "t", fd) }},
		{"RecvFD", func() error { _, err := chs[0].RecvFD(ctx, pids[1], "t"); return err }},
		{"AllGatherFD", func() error { _, err := chs[0].AllGatherFD(ctx, 0, pids, "t", fd); return err }},
		{"BroadcastFD", func() error { _, err := chs[0].BroadcastFD(ctx, 0, 0, pids, "t", fd); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.call(), backend.ErrClosed)
		})
	}
}

// waitQueued waits until ch holds a descriptor from pid with tag.
func waitQueued(t *testing.T, ch *Channel, pid int, tag string) {
	t.Helper()
	require.Eventually(t, func() bool { return ch.queued(pid, tag) }, 10*time.Second, time.Millisecond)
}

func TestCloseClosesUnclaimedDescriptors(t *testing.T) {
	chs, pids := newGroup(t, 2)
	before := openFDs(t)
	fd := memfdWith(t, "unclaimed")
	require.NoError(t, chs[1].SendFD(testCtx(t), pids[0], "t", fd))
	require.NoError(t, unix.Close(fd))
	waitQueued(t, chs[0], pids[1], "t")
	require.Equal(t, before+1, openFDs(t), "the received descriptor is held by the channel")

	require.NoError(t, chs[0].Close())
	require.Equal(t, before-1, openFDs(t), "Close releases the socket and the unclaimed descriptor")
}

func TestSetPeersClosesDescriptorsOfDepartedPeers(t *testing.T) {
	chs, pids := newGroup(t, 3)
	before := openFDs(t)
	fd := memfdWith(t, "departing")
	require.NoError(t, chs[1].SendFD(testCtx(t), pids[0], "t", fd))
	require.NoError(t, unix.Close(fd))
	waitQueued(t, chs[0], pids[1], "t")

	chs[0].SetPeers([]int{pids[0], pids[2]})
	require.Equal(t, before, openFDs(t))
	_, err := chs[0].RecvFD(testCtx(t), pids[1], "t")
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestSendRecvRejectBadArguments(t *testing.T) {
	chs, pids := newGroup(t, 2)
	nonce, err := NewNonce()
	require.NoError(t, err)
	lonely := listenAs(t, nonce, fakePIDBase+50)
	fd := memfdWith(t, "x")
	defer unix.Close(fd)
	ctx := testCtx(t)

	tests := []struct {
		name string
		call func() error
	}{
		{"send to non-peer", func() error { return chs[0].SendFD(ctx, fakePIDBase+77, "t", fd) }},
		{"send negative descriptor", func() error { return chs[0].SendFD(ctx, pids[1], "t", -1) }},
		{"send closed descriptor", func() error {
			dead := memfdWith(t, "gone")
			require.NoError(t, unix.Close(dead))
			return chs[0].SendFD(ctx, pids[1], "t", dead)
		}},
		{"send long tag", func() error { return chs[0].SendFD(ctx, pids[1], strings.Repeat("t", MaxTagLen+1), fd) }},
		{"receive from non-peer", func() error { _, err := chs[0].RecvFD(ctx, fakePIDBase+77, "t"); return err }},
		{"receive before SetPeers", func() error { _, err := lonely.RecvFD(ctx, pids[0], "t"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.call(), backend.ErrInvalidArgument)
		})
	}
}

// TestDroppedMessages sends hand-made datagrams from a plain socket of this
// process. Each must be dropped with every descriptor it carried closed,
// and must not disturb a legitimate message sent after it.
func TestDroppedMessages(t *testing.T) {
	tests := []struct {
		name    string
		payload func(pids []int) []byte
		fds     int
		reason  string
	}{
		{"bad magic", func([]int) []byte { return []byte("XXXX\x01\x00\x00\x00\x40\x01\x00t") }, 1, "magic"},
		{"short payload", func([]int) []byte { return []byte("IN") }, 1, "shorter than"},
		{"oversized payload", func(p []int) []byte { return append(encodePayload(p[1], "t"), make([]byte, payloadBuf)...) }, 1, "payload truncated"},
		{"no descriptor", func(p []int) []byte { return encodePayload(p[1], "t") }, 0, "carries 0 descriptors"},
		{"two descriptors", func(p []int) []byte { return encodePayload(p[1], "t") }, 2, "carries 2 descriptors"},
		{"too many descriptors", func(p []int) []byte { return encodePayload(p[1], "t") }, oobFDs + 4, "control data truncated"},
		{"claims a non-peer pid", func([]int) []byte { return encodePayload(fakePIDBase+77, "t") }, 1, "not a peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drops := newDropLog()
			chs, pids := newGroup(t, 2, WithLogger(drops.logger()))
			before := openFDs(t)

			sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			var oob []byte
			fds := make([]int, tt.fds)
			for i := range fds {
				fds[i] = memfdWith(t, "forged")
			}
			if len(fds) > 0 {
				oob = unix.UnixRights(fds...)
			}
			err = unix.Sendmsg(sock, tt.payload(pids), oob, &unix.SockaddrUnix{Name: chs[0].Name()}, 0)
			require.NoError(t, err)
			closeFDs(append(fds, sock))

			require.Contains(t, drops.next(t), tt.reason)
			require.Equal(t, before, openFDs(t), "every descriptor of a dropped message is closed")

			fd := memfdWith(t, "legit")
			require.NoError(t, chs[1].SendFD(testCtx(t), pids[0], "t", fd))
			require.NoError(t, unix.Close(fd))
			got, err := chs[0].RecvFD(testCtx(t), pids[1], "t")
			require.NoError(t, err)
			require.Equal(t, "legit", readFD(t, got))
			require.NoError(t, unix.Close(got))
		})
	}
}

// TestBoundBy: a process's channel socket is found by its pid until it is
// closed.
func TestBoundBy(t *testing.T) {
	nonce, err := NewNonce()
	require.NoError(t, err)
	ch, err := Listen(nonce)
	require.NoError(t, err)
	me := os.Getpid()
	require.Equal(t, []string{ch.Name()}, BoundBy([]int{0, me}))
	require.Empty(t, BoundBy([]int{me + 1}))
	require.NoError(t, ch.Close())
	require.Empty(t, BoundBy([]int{me}))
}
