//go:build linux

package plugin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
)

// staleAfter is how long a descriptor that arrived for a call that never
// claimed it (the call failed or timed out on its way) is kept before it is
// closed.
const staleAfter = 2 * time.Minute

// fdChannel carries descriptors between a host and its plugin over one
// SOCK_SEQPACKET socket of a socketpair, beside the gRPC connection. Each
// message is an 8-byte token with one descriptor attached (SCM_RIGHTS); the
// sender then names the token in its gRPC request or reply, and the
// receiver claims the descriptor by token. Either side sends and receives.
//
// The socket also tells each side when the other is gone: the kernel closes
// a dead process's end, and the survivor reads end-of-file.
type fdChannel struct {
	conn *net.UnixConn
	log  *slog.Logger
	next atomic.Uint64

	sendMu sync.Mutex // one sender at a time: the write deadline is per socket

	mu     sync.Mutex
	parked map[uint64]parkedFile    // arrived, not yet claimed
	wait   map[uint64]chan *os.File // claimed, not yet arrived
	err    error                    // why the reader stopped
	done   chan struct{}            // closed when the reader stops
	onDone func(error)              // called once when the reader stops
}

type parkedFile struct {
	f  *os.File
	at time.Time
}

// socketPair returns the two ends of a new SOCK_SEQPACKET socketpair, both
// close-on-exec (an end handed to a child is duplicated into it by
// exec.Cmd.ExtraFiles).
func socketPair() (a, b *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, backend.Errorf(backend.CodeUnavailable, "plugin: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "intranode-plugin-fds"), os.NewFile(uintptr(fds[1]), "intranode-plugin-fds"), nil
}

// newFDChannel starts a channel on f, one end of a socketPair; it takes
// ownership of f. onDone, if set, is called once (from the reader
// goroutine) when the other end is gone or the channel is closed.
func newFDChannel(f *os.File, log *slog.Logger, onDone func(error)) (*fdChannel, error) {
	defer f.Close()
	typ, err := sockType(f)
	if err != nil {
		return nil, err
	}
	if typ != unix.SOCK_SEQPACKET {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: descriptor %s is a socket of type %d, want SOCK_SEQPACKET", f.Name(), typ)
	}
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, backend.Errorf(backend.CodeUnavailable, "plugin: descriptor socket: %w", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		_ = nc.Close()
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: descriptor socket is a %T, not a Unix socket", nc)
	}
	c := &fdChannel{
		conn:   uc,
		log:    log,
		parked: map[uint64]parkedFile{},
		wait:   map[uint64]chan *os.File{},
		done:   make(chan struct{}),
		onDone: onDone,
	}
	go c.read()
	return c, nil
}

func sockType(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: descriptor %s: %w", f.Name(), err)
	}
	var (
		typ  int
		serr error
	)
	if err := rc.Control(func(fd uintptr) { typ, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE) }); err != nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: descriptor %s: %w", f.Name(), err)
	}
	if serr != nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: descriptor %s is not a socket: %w", f.Name(), serr)
	}
	return typ, nil
}

// send passes a duplicate of f's descriptor to the other side and returns
// the token that names it there. f stays the caller's.
func (c *fdChannel) send(ctx context.Context, f *os.File) (uint64, error) {
	if f == nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: no descriptor to send")
	}
	token := c.next.Add(1)
	var msg [8]byte
	binary.LittleEndian.PutUint64(msg[:], token)
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: sending descriptor %s: %w", f.Name(), err)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	dl, _ := ctx.Deadline()
	if err := c.conn.SetWriteDeadline(dl); err != nil {
		return 0, c.sendError(err)
	}
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		_, _, werr = c.conn.WriteMsgUnix(msg[:], unix.UnixRights(int(fd)), nil)
	})
	if cerr != nil {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "plugin: sending descriptor %s: %w", f.Name(), cerr)
	}
	if werr != nil {
		return 0, c.sendError(werr)
	}
	return token, nil
}

func (c *fdChannel) sendError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return backend.Errorf(backend.CodeTimeout, "plugin: sending a descriptor: %w", err)
	}
	return backend.Errorf(backend.CodeUnavailable, "plugin: sending a descriptor (is the other side gone?): %w", err)
}

// take returns the descriptor the other side sent under token, waiting for
// it until ctx ends. The caller owns the file.
func (c *fdChannel) take(ctx context.Context, token uint64) (*os.File, error) {
	c.mu.Lock()
	if p, ok := c.parked[token]; ok {
		delete(c.parked, token)
		c.mu.Unlock()
		return p.f, nil
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, backend.Errorf(backend.CodeUnavailable, "plugin: waiting for descriptor %d: %w", token, err)
	}
	ch := make(chan *os.File, 1)
	c.wait[token] = ch
	c.mu.Unlock()

	var cause error
	select {
	case f := <-ch:
		return f, nil
	case <-ctx.Done():
		cause = backend.Wrap(backend.CodeTimeout, ctx.Err(), fmt.Sprintf("plugin: waiting for descriptor %d", token))
	case <-c.done:
		cause = backend.Errorf(backend.CodeUnavailable, "plugin: waiting for descriptor %d: %w", token, c.stopErr())
	}
	c.mu.Lock()
	if c.wait[token] == ch {
		delete(c.wait, token)
		c.mu.Unlock()
		return nil, cause
	}
	c.mu.Unlock()
	// Delivered while giving up: the descriptor is ours to close.
	if f := <-ch; f != nil {
		_ = f.Close()
	}
	return nil, cause
}

func (c *fdChannel) stopErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// read receives descriptors until the socket ends.
func (c *fdChannel) read() {
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, flags, _, err := c.conn.ReadMsgUnix(buf, oob)
		if err == nil && n == 0 && oobn == 0 {
			err = io.EOF // an empty SEQPACKET read is the peer's close
		}
		if err != nil {
			c.stop(err)
			return
		}
		files := c.parseRights(oob[:oobn])
		if flags&unix.MSG_CTRUNC != 0 || n != 8 || len(files) != 1 {
			c.log.Debug("plugin: dropping a malformed descriptor message", "bytes", n, "files", len(files), "flags", flags)
			for _, f := range files {
				_ = f.Close()
			}
			continue
		}
		c.deliver(binary.LittleEndian.Uint64(buf[:8]), files[0])
	}
}

func (c *fdChannel) parseRights(oob []byte) []*os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		c.log.Debug("plugin: bad control message", "err", err)
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "intranode-plugin-handle"))
		}
	}
	return files
}

func (c *fdChannel) deliver(token uint64, f *os.File) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.wait[token]; ok {
		delete(c.wait, token)
		ch <- f
		return
	}
	for t, p := range c.parked {
		if now.Sub(p.at) > staleAfter {
			c.log.Debug("plugin: closing an unclaimed descriptor", "token", t)
			_ = p.f.Close()
			delete(c.parked, t)
		}
	}
	c.parked[token] = parkedFile{f: f, at: now}
}

func (c *fdChannel) stop(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the other side closed the descriptor socket")
	}
	c.err = err
	for t, p := range c.parked {
		_ = p.f.Close()
		delete(c.parked, t)
	}
	c.mu.Unlock()
	_ = c.conn.Close() // a channel whose reader stopped is dead
	close(c.done)
	if c.onDone != nil {
		c.onDone(err)
	}
}

// Done is closed when the other side is gone or the channel is closed.
func (c *fdChannel) Done() <-chan struct{} { return c.done }

// Close shuts the socket (the other side reads end-of-file) and waits for
// the reader to stop.
func (c *fdChannel) Close() error {
	err := c.conn.Close()
	<-c.done
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return backend.Errorf(backend.CodeInternal, "plugin: closing the descriptor socket: %w", err)
	}
	return nil
}
