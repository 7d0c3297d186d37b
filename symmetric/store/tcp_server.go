package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
)

// Server serves one store over TCP to the ranks of a job; one rank runs it
// and every rank, that one included, connects with DialTCP. Keys live in a
// Mem, so blocked Gets sleep until the Set that satisfies them.
//
// The server defends itself: with a per-job secret (WithSecret, EnvSecret)
// only clients that prove they hold it get past the hello; frames over the
// size limit are refused before memory is allocated for them, each connection has a bounded number of
// blocking requests, the number of keys is bounded, and a connection that
// sends a malformed frame or an unknown opcode gets an error frame and is
// closed without disturbing the others.
type Server struct {
	opts   options
	secret []byte // nil: clients need not authenticate
	ln     net.Listener
	mem    *Mem

	mu      sync.Mutex
	conns   map[*serverConn]struct{}
	pending admissionQueue // connections still in their hello, oldest first
	served  int            // connections past their hello
	closed  bool
	done    chan struct{} // closed by Close
	wg      sync.WaitGroup
}

// ListenTCP starts a server on addr ("host:port"). An empty host, or an
// empty addr, means 127.0.0.1: the store is reachable from other hosts only
// when asked for explicitly (e.g. "0.0.0.0:port"). Port 0 picks a free port;
// Addr reports it. It honours WithSecret (or EnvSecret), WithTimeout,
// WithMaxFrameSize, WithMaxKeys, WithMaxInflight and WithLogger.
//
// With a secret, a client must prove it holds the same one (HMAC-SHA256
// challenge-response, see authHMAC) before it may read or write a key; a
// client that cannot gets an error frame matching ErrUnauthenticated and is
// disconnected.
func ListenTCP(addr string, opts ...Option) (*Server, error) {
	addr, err := listenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("tcp store: listen on %s", addr))
	}
	o := buildOptions(opts)
	s := &Server{
		opts:   o,
		secret: o.authSecret(),
		ln:     ln,
		mem:    NewMem(WithMaxKeys(o.maxKeys), WithTimeout(o.timeout)),
		conns:  make(map[*serverConn]struct{}),
		done:   make(chan struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	o.logger.Debug("tcp store: listening", "addr", s.Addr())
	return s, nil
}

func listenAddr(addr string) (string, error) {
	if addr == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", backend.Wrap(backend.CodeInvalidArgument, err, fmt.Sprintf("tcp store: listen address %q", addr))
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Addr returns the address the server listens on, as "host:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Len returns the number of keys the server holds.
func (s *Server) Len() int { return s.mem.Len() }

// Keys returns the keys the server holds that start with prefix, sorted.
func (s *Server) Keys(prefix string) []string { return s.mem.Keys(prefix) }

// Close stops the server: it stops accepting, closes every connection (their
// clients' pending and later calls fail) and drops the keys.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.wg.Wait()
	_ = s.mem.Close()
	if err != nil {
		return backend.Wrap(backend.CodeInternal, err, "tcp store: close listener")
	}
	return nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	pause := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Running out of descriptors is transient; back off, do not spin.
			s.opts.logger.Warn("tcp store: accept failed", "err", err)
			select {
			case <-time.After(pause):
			case <-s.done:
				return
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 5 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		c := &serverConn{
			s:       s,
			conn:    conn,
			r:       bufio.NewReader(conn),
			ctx:     ctx,
			cancel:  cancel,
			cancels: make(map[uint64]context.CancelFunc),
		}
		c.addr = remoteHost(conn)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.shutdown()
			return
		}
		s.conns[c] = struct{}{}
		for _, old := range s.pending.admit(c, s.opts.admission) {
			old.shutdown()
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// serverConn is one client connection. Its reader goroutine decodes
// requests and answers the ones that cannot block itself; Get and Wait on
// missing keys get a goroutine each, up to the in-flight limit.
type serverConn struct {
	s      *Server
	conn   net.Conn
	addr   string // the remote host, for admission
	served bool   // past its hello and counted in Server.served (Server.mu)
	r      *bufio.Reader
	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc

	wmu sync.Mutex // one frame at a time on the wire

	mu      sync.Mutex
	cancels map[uint64]context.CancelFunc // blocking requests in flight
	wg      sync.WaitGroup
}

// protocolError is a fatal problem with what the client sent: it is
// reported in an error frame and the connection is closed.
type protocolError struct {
	id  uint64
	err error
}

// Error returns the underlying problem.
func (e *protocolError) Error() string { return e.err.Error() }

// shutdown closes the connection, then ends its blocked requests; in that
// order, so none of them can tell the client it timed out when in truth the
// server went away.
func (c *serverConn) shutdown() {
	_ = c.conn.Close()
	c.cancel()
}

func (c *serverConn) serve() {
	log := c.s.opts.logger.With("remote", c.conn.RemoteAddr().String())
	defer func() {
		c.cancel()
		c.wg.Wait() // blocked requests end with c.ctx
		_ = c.conn.Close()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		if c.served {
			c.s.served--
		} else {
			c.s.pending.remove(c)
		}
		c.s.mu.Unlock()
		c.s.wg.Done()
	}()
	err := c.handshake()
	if err == nil {
		err = c.admitted()
	}
	for err == nil {
		err = c.next()
	}
	var perr *protocolError
	var tooLarge *frameTooLargeError
	switch {
	case errors.As(err, &perr):
		log.Debug("tcp store: closing connection", "err", err)
		c.sendError(perr.id, backend.CodeInvalidArgument, "tcp store: "+perr.Error())
	case errors.As(err, &tooLarge), errors.Is(err, errFrameEmpty), errors.Is(err, errTruncated):
		log.Debug("tcp store: closing connection", "err", err)
		c.sendError(0, backend.CodeInvalidArgument, "tcp store: "+err.Error())
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
		log.Debug("tcp store: connection closed")
	default:
		log.Debug("tcp store: connection failed", "err", err)
	}
}

// admitted moves the connection from pending to served, or refuses it
// when the server serves as many as it may.
func (c *serverConn) admitted() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if !c.s.pending.remove(c) {
		return io.EOF // evicted while finishing its hello
	}
	if c.s.served >= c.s.opts.admission.MaxConns {
		c.s.pending.add(c) // counted as pending until it goes
		c.sendError(0, backend.CodeUnavailable, fmt.Sprintf("tcp store: too many connections (limit %d)", c.s.opts.admission.MaxConns))
		return io.EOF
	}
	c.s.served++
	c.served = true
	return nil
}

// remoteHost is the host part of a connection's remote address.
func remoteHost(conn net.Conn) string {
	host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
	if err != nil {
		return conn.RemoteAddr().String()
	}
	return host
}

// admissionQueue is the pending connections in accept order, with counts
// per remote host. Guarded by Server.mu.
type admissionQueue struct {
	order  []*serverConn
	byAddr map[string]int
}

// add appends c.
func (q *admissionQueue) add(c *serverConn) {
	if q.byAddr == nil {
		q.byAddr = map[string]int{}
	}
	q.order = append(q.order, c)
	q.byAddr[c.addr]++
}

// admit adds c and returns the pending connections to evict so that the
// bounds hold: the oldest of c's address while it has too many, then the
// oldest of all while there are too many.
func (q *admissionQueue) admit(c *serverConn, a Admission) []*serverConn {
	q.add(c)
	var out []*serverConn
	for q.byAddr[c.addr] > a.MaxPendingPerAddr {
		for _, old := range q.order {
			if old.addr == c.addr {
				q.remove(old)
				out = append(out, old)
				break
			}
		}
	}
	for len(q.order) > a.MaxPending {
		old := q.order[0]
		q.remove(old)
		out = append(out, old)
	}
	return out
}

// remove drops c and reports whether it was pending.
func (q *admissionQueue) remove(c *serverConn) bool {
	for i, x := range q.order {
		if x == c {
			q.order = append(q.order[:i], q.order[i+1:]...)
			if q.byAddr[c.addr]--; q.byAddr[c.addr] == 0 {
				delete(q.byAddr, c.addr)
			}
			return true
		}
	}
	return false
}

// handshake reads the client's hello and answers it; when the server has a
// secret, the client must then prove it (see authHMAC) before anything else
// is read. The whole exchange must finish within the handshake timeout, so
// silent or slow connections cannot pile up.
func (c *serverConn) handshake() error {
	deadline := time.Now().Add(c.s.opts.admission.HelloTimeout)
	_ = c.conn.SetReadDeadline(deadline)
	op, id, body, err := c.readHandshakeFrame()
	if err != nil {
		return err
	}
	if op != opHello {
		return &protocolError{id: id, err: fmt.Errorf("expected a hello frame, got opcode 0x%02x", op)}
	}
	magic := body.take(len(protocolMagic))
	version := body.u32()
	if err := body.end(); err != nil || string(magic) != protocolMagic {
		return &protocolError{id: id, err: errors.New("malformed hello: not an intranode store client")}
	}
	if version != protocolVersion {
		c.sendError(id, backend.CodeNotSupported, fmt.Sprintf(
			"tcp store: protocol version mismatch: client speaks %d, server speaks %d", version, protocolVersion))
		return io.EOF
	}
	w := newFrame(respOK, id)
	w.u32(protocolVersion)
	if c.s.secret == nil {
		w.u8(authNone)
		if err := c.send(w); err != nil {
			return err
		}
		return c.conn.SetReadDeadline(time.Time{})
	}
	serverNonce, err := newNonce()
	if err != nil {
		return err
	}
	w.u8(authHMAC)
	w.b = append(w.b, serverNonce...)
	if err := c.send(w); err != nil {
		return err
	}
	if err := c.authenticate(serverNonce); err != nil {
		return err
	}
	return c.conn.SetReadDeadline(time.Time{})
}

// authenticate reads the client's proof of the secret and answers with the
// server's own. A client that sends anything else, or a wrong proof, gets
// one error frame and is disconnected; nothing of the store is reached.
func (c *serverConn) authenticate(serverNonce []byte) error {
	op, id, body, err := c.readHandshakeFrame()
	if err != nil {
		return err
	}
	refuse := func(format string, args ...any) error {
		c.sendError(0, backend.CodeInvalidArgument, ErrUnauthenticated.Error()+": "+fmt.Sprintf(format, args...))
		return io.EOF
	}
	if op != opAuth {
		return refuse("this server requires a secret; the client sent opcode 0x%02x instead of its proof", op)
	}
	size := len(body.b)
	clientNonce, mac := body.take(nonceSize), body.take(macSize)
	if err := body.end(); err != nil || id != 0 {
		return refuse("malformed proof (%d bytes, id %d)", size, id)
	}
	if !validProof(c.s.secret, clientLabel, serverNonce, clientNonce, mac) {
		return refuse("the client's proof does not match this job's secret")
	}
	w := newFrame(respOK, 0)
	w.b = append(w.b, proof(c.s.secret, serverLabel, serverNonce, clientNonce)...)
	return c.send(w)
}

// readFrame reads one request frame and splits its header; a frame that
// does not parse is a protocolError.
func (c *serverConn) readFrame() (op byte, id uint64, body *frameReader, err error) {
	return c.parseFrame(c.readPayload())
}

// readHandshakeFrame reads a frame of the hello exchange: at most
// maxHandshakeFrame bytes, under the read deadline the handshake set, which
// bounds the whole exchange from accept to proof.
func (c *serverConn) readHandshakeFrame() (op byte, id uint64, body *frameReader, err error) {
	n, err := readFrameHeader(c.r, maxHandshakeFrame)
	if err != nil {
		return 0, 0, nil, err
	}
	return c.parseFrame(readFrameBody(c.r, n))
}

func (c *serverConn) parseFrame(p []byte, err error) (op byte, id uint64, body *frameReader, _ error) {
	if err != nil {
		return 0, 0, nil, err
	}
	if op, id, body, err = parseHeader(p); err != nil {
		return 0, 0, nil, &protocolError{err: err}
	}
	return op, id, body, nil
}

// readPayload reads one request frame. The body must follow its header
// within the store's timeout; the gap between frames is unbounded, since
// clients hold idle connections for the life of a job.
func (c *serverConn) readPayload() ([]byte, error) {
	n, err := readFrameHeader(c.r, c.s.opts.maxFrameSize)
	if err != nil {
		return nil, err
	}
	if c.r.Buffered() < int(n) {
		_ = c.conn.SetReadDeadline(time.Now().Add(c.s.opts.timeout))
		defer func() { _ = c.conn.SetReadDeadline(time.Time{}) }()
	}
	return readFrameBody(c.r, n)
}

// next reads and handles one request.
func (c *serverConn) next() error {
	op, id, body, err := c.readFrame()
	if err != nil {
		return err
	}
	if id == 0 {
		return &protocolError{err: errors.New("request id 0 is reserved")}
	}
	switch op {
	case opSet:
		key, value := body.str(), body.blob()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		return c.reply(id, c.s.mem.Set(c.ctx, key, value), nil)
	case opGet:
		timeout, key := body.i64(), body.str()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		v, ok, err := c.s.mem.lookup(key)
		if ok || err != nil {
			return c.reply(id, err, func(w *frameWriter) { w.blob(v) })
		}
		return c.block(id, timeout, func(ctx context.Context) error {
			v, err := c.s.mem.Get(ctx, key)
			return c.reply(id, err, func(w *frameWriter) { w.blob(v) })
		})
	case opWait:
		timeout, keys := body.i64(), body.strs()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		if ok, err := c.s.mem.Check(c.ctx, keys...); ok || err != nil {
			return c.reply(id, err, nil)
		}
		return c.block(id, timeout, func(ctx context.Context) error {
			return c.reply(id, c.s.mem.Wait(ctx, keys...), nil)
		})
	case opAdd:
		key, delta := body.str(), body.i64()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		n, err := c.s.mem.Add(c.ctx, key, delta)
		return c.reply(id, err, func(w *frameWriter) { w.i64(n) })
	case opCAS:
		key, expected, desired := body.str(), body.blob(), body.blob()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		v, err := c.s.mem.CompareAndSet(c.ctx, key, expected, desired)
		return c.reply(id, err, func(w *frameWriter) { w.blob(v) })
	case opCheck:
		keys := body.strs()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		ok, err := c.s.mem.Check(c.ctx, keys...)
		return c.reply(id, err, func(w *frameWriter) { w.u8(boolByte(ok)) })
	case opDelete:
		key := body.str()
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		existed, err := c.s.mem.Delete(c.ctx, key)
		return c.reply(id, err, func(w *frameWriter) { w.u8(boolByte(existed)) })
	case opCancel:
		if err := body.end(); err != nil {
			return malformed(op, id, err)
		}
		c.mu.Lock()
		cancel := c.cancels[id]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return nil
	default:
		return &protocolError{id: id, err: fmt.Errorf("unknown opcode 0x%02x", op)}
	}
}

func malformed(op byte, id uint64, err error) error {
	return &protocolError{id: id, err: fmt.Errorf("malformed %s request: %w", opNames[op], err)}
}

// block runs a request that waits for keys on its own goroutine, bounded by
// the client's remaining deadline (sent in the request), the connection and
// the in-flight limit.
func (c *serverConn) block(id uint64, timeout int64, run func(ctx context.Context) error) error {
	c.mu.Lock()
	if _, dup := c.cancels[id]; dup {
		c.mu.Unlock()
		return c.sendError(id, backend.CodeInvalidArgument, fmt.Sprintf("tcp store: request id %d is already in flight", id))
	}
	if len(c.cancels) >= c.s.opts.maxInflight {
		c.mu.Unlock()
		return c.sendError(id, backend.CodeUnavailable, fmt.Sprintf(
			"tcp store: too many blocking requests on this connection (limit %d)", c.s.opts.maxInflight))
	}
	ctx, cancel := context.WithTimeout(c.ctx, time.Duration(max(timeout, 0)))
	c.cancels[id] = cancel
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.cancels, id)
			c.mu.Unlock()
			cancel()
		}()
		if err := run(ctx); err != nil {
			// The response could not be written: the connection is gone
			// or stuck; closing it ends the reader too.
			c.shutdown()
		}
	}()
	return nil
}

// reply answers request id with err, or with respOK and what body writes.
func (c *serverConn) reply(id uint64, err error, body func(*frameWriter)) error {
	if err != nil {
		return c.sendError(id, backend.CodeOf(err), err.Error())
	}
	w := newFrame(respOK, id)
	if body != nil {
		body(w)
	}
	return c.send(w)
}

func (c *serverConn) sendError(id uint64, code backend.Code, msg string) error {
	w := newFrame(respErr, id)
	w.u32(uint32(code))
	w.str(msg)
	return c.send(w)
}

// send writes one frame, giving up after the store's timeout so a client
// that stops reading cannot hold the server's goroutines forever.
func (c *serverConn) send(w *frameWriter) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.s.opts.timeout))
	_, err := c.conn.Write(w.bytes())
	return err
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
