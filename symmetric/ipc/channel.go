package ipc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intranode/intranode/backend"
	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds a blocking call whose context has no deadline.
const DefaultTimeout = 60 * time.Second

// maxNonceLen keeps socket names well inside the 107 bytes an abstract
// address may hold.
const maxNonceLen = 64

// Send retry backoff while a receiver has not bound yet or its queue is full.
const (
	minBackoff = time.Millisecond
	maxBackoff = 50 * time.Millisecond
)

type options struct {
	pid     int
	timeout time.Duration
	logger  *slog.Logger
}

// Option configures Listen.
type Option func(*options)

// WithPID makes the channel bind, and name itself to peers, as pid instead
// of the calling process's pid. It exists so that tests can run a whole
// group of channels in one process; programs leave it alone. Receivers
// believe a claimed pid only from messages the kernel says come from their
// own process, so the option grants nothing across processes.
func WithPID(pid int) Option { return func(o *options) { o.pid = pid } }

// WithTimeout sets the bound applied to blocking calls whose context has no
// deadline (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger for dropped messages and other diagnostics,
// all at debug level (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// NewNonce returns 128 random bits as 32 hex digits, for a group to share
// through its store and pass to Listen.
func NewNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", backend.Wrap(backend.CodeInternal, err, "ipc: reading random nonce")
	}
	return hex.EncodeToString(b[:]), nil
}

// socketPrefix starts every channel's socket name.
const socketPrefix = "@intranode-"

// SocketName is the abstract socket address ("@" stands for the leading NUL
// byte) of the channel that process pid opens for the group with nonce.
func SocketName(nonce string, pid int) string {
	return fmt.Sprintf("%s%s-%d", socketPrefix, nonce, pid)
}

// BoundBy lists the channel sockets still bound under the names of the
// given processes (SocketName's pid), from /proc/net/unix: after those
// processes ended, a leftover. Nil where that file cannot be read.
func BoundBy(pids []int) []string {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil
	}
	var left []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[len(f)-1], socketPrefix) {
			continue
		}
		name := f[len(f)-1]
		for _, pid := range pids {
			if pid > 0 && strings.HasSuffix(name, "-"+strconv.Itoa(pid)) {
				left = append(left, name)
			}
		}
	}
	return left
}

type queueKey struct {
	pid int
	tag string
}

// Channel is one process's endpoint for exchanging descriptors with the
// other processes of its group. Its methods are safe for concurrent use.
type Channel struct {
	nonce   string
	pid     int    // the pid this channel is named by and names itself as
	self    int    // the real pid of this process
	uid     uint32 // senders must run as this user
	name    string
	timeout time.Duration
	log     *slog.Logger
	conn    *net.UnixConn
	raw     syscall.RawConn

	done       chan struct{} // closed by Close
	readerDone chan struct{} // closed when the receive loop exits
	closeOnce  sync.Once

	mu      sync.Mutex
	peers   map[int]bool
	reading bool // the receive loop has been started
	queues  map[queueKey][]int
	arrived chan struct{} // closed and replaced when queues or readErr change
	readErr error         // why the receive loop stopped, if it failed
	closed  bool
}

// Listen opens this process's channel for the group whose nonce is given
// (every rank passes the same one, shared through the group's store). The
// socket is bound to SocketName(nonce, os.Getpid()). If that name is already
// bound, Listen fails with an error matching backend.ErrUnavailable.
//
// The channel accepts no message until SetPeers names the group; messages
// that arrive before wait in the kernel.
func Listen(nonce string, opts ...Option) (*Channel, error) {
	o := options{pid: os.Getpid(), timeout: DefaultTimeout, logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	if err := checkNonce(nonce); err != nil {
		return nil, err
	}
	if o.pid <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "ipc: pid %d is not positive", o.pid)
	}
	if o.timeout <= 0 {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "ipc: default timeout %v is not positive", o.timeout)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	name := SocketName(nonce, o.pid)
	// SO_PASSCRED must be on before the name is bound, or a message could
	// arrive without credentials and be dropped.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "unixgram", name)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, backend.Wrap(backend.CodeUnavailable, err,
				fmt.Sprintf("ipc: IPC socket name %q is taken: another process bound it first", name))
		}
		return nil, backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("ipc: binding IPC socket %q", name))
	}
	conn := pc.(*net.UnixConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		_ = conn.Close()
		return nil, backend.Wrap(backend.CodeInternal, err, "ipc: raw access to IPC socket")
	}
	return &Channel{
		nonce:      nonce,
		pid:        o.pid,
		self:       os.Getpid(),
		uid:        uint32(os.Getuid()),
		name:       name,
		timeout:    o.timeout,
		log:        o.logger,
		conn:       conn,
		raw:        raw,
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		peers:      map[int]bool{},
		queues:     map[queueKey][]int{},
		arrived:    make(chan struct{}),
	}, nil
}

func checkNonce(nonce string) error {
	if nonce == "" || len(nonce) > maxNonceLen {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: nonce must be 1 to %d characters, got %d", maxNonceLen, len(nonce))
	}
	for _, r := range nonce {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return backend.Errorf(backend.CodeInvalidArgument, "ipc: nonce %q may hold only letters, digits, '-' and '_'", nonce)
		}
	}
	return nil
}

// Name is the abstract address the channel is bound to.
func (c *Channel) Name() string { return c.name }

// PID is the pid the channel is named by: the process's own unless WithPID
// overrode it.
func (c *Channel) PID() int { return c.pid }

// SetPeers names the processes of the group, this one included. Only
// messages from these pids, running as this process's user, are accepted;
// SendFD sends only to them. A later call replaces the set, and descriptors
// already received from pids that left it are closed. The first call starts
// receiving.
func (c *Channel) SetPeers(pids []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.peers = make(map[int]bool, len(pids))
	for _, p := range pids {
		c.peers[p] = true
	}
	for k, q := range c.queues {
		if !c.peers[k.pid] {
			c.log.Debug("ipc: closing descriptors from a pid that is no longer a peer",
				"pid", k.pid, "tag", k.tag, "fds", len(q))
			closeFDs(q)
			delete(c.queues, k)
		}
	}
	if !c.reading {
		c.reading = true
		go c.receive()
	}
}

// SendFD sends a duplicate of fd, labelled with tag, to the peer process pid
// (the kernel duplicates it into the receiver; the caller keeps fd). While
// the receiver has not bound its socket yet, or its queue is full, SendFD
// retries with backoff until ctx ends, then fails with an error matching
// backend.ErrTimeout.
func (c *Channel) SendFD(ctx context.Context, pid int, tag string, fd int) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if err := c.checkSend(pid, tag, fd); err != nil {
		return err
	}
	return c.send(ctx, pid, tag, fd)
}

func (c *Channel) checkSend(pid int, tag string, fd int) error {
	if fd < 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: descriptor %d is not valid", fd)
	}
	if len(tag) > MaxTagLen {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: tag of %d bytes exceeds %d", len(tag), MaxTagLen)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return backend.Errorf(backend.CodeClosed, "ipc: channel %s is closed", c.name)
	}
	if !c.peers[pid] {
		return backend.Errorf(backend.CodeInvalidArgument, "ipc: pid %d is not a peer of this channel (see SetPeers)", pid)
	}
	return nil
}

// send delivers one message, retrying while the receiver is absent or busy.
func (c *Channel) send(ctx context.Context, pid int, tag string, fd int) error {
	payload := encodePayload(c.pid, tag)
	oob := unix.UnixRights(fd)
	to := &unix.SockaddrUnix{Name: SocketName(c.nonce, pid)}
	wait := minBackoff
	var timer *time.Timer
	for {
		var serr error
		if err := c.raw.Control(func(s uintptr) {
			serr = unix.Sendmsg(int(s), payload, oob, to, unix.MSG_DONTWAIT)
		}); err != nil {
			return backend.Wrap(backend.CodeClosed, err, fmt.Sprintf("ipc: channel %s is closed", c.name))
		}
		var why string
		switch {
		case serr == nil:
			return nil
		case errors.Is(serr, unix.ECONNREFUSED), errors.Is(serr, unix.ENOENT):
			why = fmt.Sprintf("pid %d has not bound %s", pid, to.Name)
		case errors.Is(serr, unix.EAGAIN), errors.Is(serr, unix.ENOBUFS), errors.Is(serr, unix.EINTR):
			why = fmt.Sprintf("the queue of pid %d stayed full", pid)
		case errors.Is(serr, unix.EBADF):
			return backend.Wrap(backend.CodeInvalidArgument, serr, fmt.Sprintf("ipc: descriptor %d is not open", fd))
		default:
			return backend.Wrap(backend.CodeUnavailable, serr, fmt.Sprintf("ipc: sending tag %q to pid %d", tag, pid))
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-c.done:
			return backend.Errorf(backend.CodeClosed, "ipc: channel %s closed while sending tag %q to pid %d", c.name, tag, pid)
		case <-ctx.Done():
			return backend.Wrap(backend.CodeTimeout, fmt.Errorf("%w; last attempt: %w", ctx.Err(), serr),
				fmt.Sprintf("ipc: sending descriptor with tag %q to pid %d: %s", tag, pid, why))
		}
		wait = min(2*wait, maxBackoff)
	}
}

// RecvFD returns the next descriptor that process fromPID sent with tag.
// Messages from other peers or with other tags that arrive meanwhile are
// kept for the calls that ask for them; descriptors with the same sender and
// tag come out in the order they arrived. The caller owns the descriptor,
// which is close-on-exec. When ctx ends first the error matches
// backend.ErrTimeout and names the peer; when the channel closes, it matches
// backend.ErrClosed.
func (c *Channel) RecvFD(ctx context.Context, fromPID int, tag string) (int, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	k := queueKey{fromPID, tag}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return -1, backend.Errorf(backend.CodeClosed, "ipc: channel %s is closed", c.name)
		}
		if !c.peers[fromPID] {
			c.mu.Unlock()
			return -1, backend.Errorf(backend.CodeInvalidArgument, "ipc: pid %d is not a peer of this channel (see SetPeers)", fromPID)
		}
		if fd, ok := c.takeLocked(k); ok {
			c.mu.Unlock()
			return fd, nil
		}
		if c.readErr != nil {
			err := c.readErr
			c.mu.Unlock()
			return -1, backend.Wrap(backend.CodeInternal, err, fmt.Sprintf("ipc: channel %s stopped receiving", c.name))
		}
		arrived := c.arrived
		c.mu.Unlock()
		select {
		case <-arrived:
		case <-c.done:
			return -1, backend.Errorf(backend.CodeClosed, "ipc: channel %s closed while waiting for pid %d (tag %q)", c.name, fromPID, tag)
		case <-ctx.Done():
			return -1, backend.Wrap(backend.CodeTimeout, ctx.Err(),
				fmt.Sprintf("ipc: no descriptor with tag %q arrived from pid %d", tag, fromPID))
		}
	}
}

// takeLocked pops the oldest descriptor queued under k. c.mu is held.
func (c *Channel) takeLocked(k queueKey) (int, bool) {
	q := c.queues[k]
	if len(q) == 0 {
		return -1, false
	}
	fd := q[0]
	if len(q) == 1 {
		delete(c.queues, k)
	} else {
		c.queues[k] = q[1:]
	}
	return fd, true
}

// queued reports whether a descriptor from pid with tag is waiting.
func (c *Channel) queued(pid int, tag string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queues[queueKey{pid, tag}]) > 0
}

// Close closes the socket and every received descriptor not yet claimed,
// and makes blocked calls fail with an error matching backend.ErrClosed.
// Closing again does nothing.
func (c *Channel) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		reading := c.reading
		c.mu.Unlock()
		close(c.done)
		if cerr := c.conn.Close(); cerr != nil {
			err = backend.Wrap(backend.CodeInternal, cerr, fmt.Sprintf("ipc: closing %s", c.name))
		}
		if reading {
			<-c.readerDone
		}
		c.mu.Lock()
		for k, q := range c.queues {
			closeFDs(q)
			delete(c.queues, k)
		}
		c.mu.Unlock()
	})
	return err
}

// bound applies the default timeout to a context without a deadline.
func (c *Channel) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// receive is the receive loop, started by the first SetPeers. It reads
// every message as it arrives so that senders never wait on a caller, and
// sorts each into its queue or drops it.
func (c *Channel) receive() {
	defer close(c.readerDone)
	buf := make([]byte, payloadBuf)
	oob := make([]byte, oobLen())
	for {
		var n, oobn, flags int
		var rerr error
		err := c.raw.Read(func(s uintptr) bool {
			n, oobn, flags, _, rerr = unix.Recvmsg(int(s), buf, oob, unix.MSG_CMSG_CLOEXEC)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		switch {
		case oobn > 0:
			// The message arrived (control data is only reported then), so
			// its descriptors are installed here and are ours to hand out
			// or close, whatever else went wrong.
			c.admit(buf[:max(n, 0)], oob[:oobn], flags, rerr)
		case err != nil:
			if !errors.Is(err, net.ErrClosed) {
				c.fail(err)
			}
			return
		case errors.Is(rerr, unix.EINTR):
		case rerr != nil:
			c.fail(rerr)
			return
		case oobn == 0:
			c.log.Debug("ipc: dropped message", "reason", "no control data (no credentials, no descriptor)", "bytes", n)
		}
	}
}

// fail records why the receive loop stopped and wakes the waiters.
func (c *Channel) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.log.Debug("ipc: receive loop stopped", "socket", c.name, "err", err)
	c.readErr = err
	close(c.arrived)
	c.arrived = make(chan struct{})
}

// admit checks one received message and queues its descriptor, or closes
// every descriptor it carried and logs why.
func (c *Channel) admit(payload, oob []byte, flags int, rerr error) {
	m, err := parseMessage(payload, oob, flags)
	if err == nil && rerr != nil {
		err = fmt.Errorf("receive error: %w", rerr)
	}
	if err != nil {
		c.drop(m, err.Error())
		return
	}
	// The kernel's pid is the sender's identity. Only a message from this
	// very process may name another pid (channels opened WithPID).
	from := int(m.cred.Pid)
	if from == c.self {
		from = m.claimedPID
	} else if m.claimedPID != from {
		c.drop(m, fmt.Sprintf("payload claims pid %d but the kernel says pid %d", m.claimedPID, from))
		return
	}
	if m.cred.Uid != c.uid {
		c.drop(m, fmt.Sprintf("sender uid %d differs from ours (%d)", m.cred.Uid, c.uid))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		closeFDs(m.fds)
	case !c.peers[from]:
		closeFDs(m.fds)
		c.logDrop(m, fmt.Sprintf("pid %d is not a peer", from))
	default:
		k := queueKey{from, m.tag}
		c.queues[k] = append(c.queues[k], m.fds[0])
		close(c.arrived)
		c.arrived = make(chan struct{})
	}
}

func (c *Channel) drop(m message, reason string) {
	closeFDs(m.fds)
	c.logDrop(m, reason)
}

// logDrop logs after the descriptors are closed, so anyone watching the log
// sees the descriptor table already restored.
func (c *Channel) logDrop(m message, reason string) {
	c.log.Debug("ipc: dropped message", "reason", reason, "socket", c.name,
		"pid", m.cred.Pid, "uid", m.cred.Uid, "fds", len(m.fds))
}
