package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intranode/intranode/backend"
)

// TCP is a Store client of a Server. One connection carries any number of
// concurrent calls (up to WithMaxInflight), matched to their responses by
// request id. Blocking calls wait on the server, which is told the caller's
// remaining deadline. If the connection fails, every pending and later call
// fails at once with an error matching backend.ErrPeerFailed; after Close,
// with one matching backend.ErrClosed.
type TCP struct {
	opts   options
	secret []byte // nil: the server must not ask for one
	addr   string
	conn   net.Conn

	wmu    sync.Mutex // one frame at a time on the wire
	slots  chan struct{}
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan tcpResponse
	err     error         // why the connection ended; set once
	done    chan struct{} // closed when err is set

	readerDone chan struct{}
}

var _ Store = (*TCP)(nil)

type tcpResponse struct {
	kind byte
	body *frameReader
}

// DialTCP connects to the server at addr and exchanges the protocol hello.
// It honours WithSecret (or EnvSecret), WithTimeout, WithMaxFrameSize,
// WithMaxInflight and WithLogger.
//
// With a secret, the client proves it to the server and requires the
// server to prove it back before any key is read or written; without one,
// it refuses a server that asks for one. Either failure matches
// ErrUnauthenticated.
func DialTCP(ctx context.Context, addr string, opts ...Option) (*TCP, error) {
	o := buildOptions(opts)
	ctx, cancel := withDeadline(ctx, o.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, timeoutError(ctx, fmt.Sprintf("tcp store: dial %s", addr))
		}
		return nil, backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("tcp store: dial %s", addr))
	}
	c := &TCP{
		opts:       o,
		secret:     o.authSecret(),
		addr:       addr,
		conn:       conn,
		slots:      make(chan struct{}, o.maxInflight),
		pending:    make(map[uint64]chan tcpResponse),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	r := bufio.NewReader(conn)
	if err := c.hello(ctx, r); err != nil {
		_ = conn.Close()
		return nil, err
	}
	go c.read(r)
	return c, nil
}

// hello sends the client's protocol version and checks the server's answer.
func (c *TCP) hello(ctx context.Context, r *bufio.Reader) error {
	deadline, _ := ctx.Deadline()
	_ = c.conn.SetDeadline(deadline)
	// Cancellation must interrupt the exchange too, not only the deadline.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Now()) })
	defer stop()
	fail := func(err error) error {
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return timeoutError(ctx, fmt.Sprintf("tcp store: hello to %s", c.addr))
		}
		return backend.Wrap(backend.CodeUnavailable, err, fmt.Sprintf("tcp store: hello to %s", c.addr))
	}
	w := newFrame(opHello, 0)
	w.b = append(w.b, protocolMagic...)
	w.u32(protocolVersion)
	kind, body, err := c.handshakeFrame(r, w, fail)
	if err != nil {
		return err
	}
	if kind == respErr {
		return serverError(body, "hello")
	}
	version, auth := body.u32(), body.u8()
	var serverNonce []byte
	if auth == authHMAC {
		serverNonce = body.take(nonceSize)
	}
	switch {
	case kind != respOK || body.end() != nil:
		return backend.Errorf(backend.CodeUnavailable, "tcp store: %s is not an intranode store server", c.addr)
	case version != protocolVersion:
		return backend.Errorf(backend.CodeNotSupported,
			"tcp store: protocol version mismatch: client speaks %d, server %s speaks %d", protocolVersion, c.addr, version)
	case auth == authNone && c.secret != nil:
		return backend.Errorf(backend.CodeInvalidArgument,
			"%w: server %s does not authenticate its clients but this client has a secret; refusing to trust it",
			ErrUnauthenticated, c.addr)
	case auth == authHMAC && c.secret == nil:
		return backend.Errorf(backend.CodeInvalidArgument,
			"%w: server %s requires the job's secret; set %s or use store.WithSecret", ErrUnauthenticated, c.addr, EnvSecret)
	case auth == authHMAC:
		if err := c.authenticate(r, serverNonce, fail); err != nil {
			return err
		}
	case auth != authNone:
		return backend.Errorf(backend.CodeNotSupported,
			"tcp store: server %s requires authentication method %d, which this client does not support", c.addr, auth)
	}
	if !stop() {
		return fail(context.Canceled)
	}
	return c.conn.SetDeadline(time.Time{})
}

// handshakeFrame sends one frame of the handshake (hello, auth) and reads
// the server's answer; an I/O or framing failure goes through fail.
func (c *TCP) handshakeFrame(r *bufio.Reader, w *frameWriter, fail func(error) error) (byte, *frameReader, error) {
	if _, err := c.conn.Write(w.bytes()); err != nil {
		return 0, nil, fail(err)
	}
	n, err := readFrameHeader(r, c.opts.maxFrameSize)
	if err != nil {
		return 0, nil, fail(err)
	}
	p, err := readFrameBody(r, n)
	if err != nil {
		return 0, nil, fail(err)
	}
	kind, _, body, err := parseHeader(p)
	if err != nil {
		return 0, nil, fail(err)
	}
	return kind, body, nil
}

// authenticate proves the secret to the server and checks the server's
// proof in return (see authHMAC), under the hello's deadline.
func (c *TCP) authenticate(r *bufio.Reader, serverNonce []byte, fail func(error) error) error {
	clientNonce, err := newNonce()
	if err != nil {
		return err
	}
	w := newFrame(opAuth, 0)
	w.b = append(w.b, clientNonce...)
	w.b = append(w.b, proof(c.secret, clientLabel, serverNonce, clientNonce)...)
	kind, body, err := c.handshakeFrame(r, w, fail)
	if err != nil {
		return err
	}
	if kind == respErr {
		code, msg := backend.Code(body.u32()), body.str()
		if body.end() != nil {
			code, msg = backend.CodeInvalidArgument, "malformed refusal"
		}
		return backend.Errorf(code, "%w: server %s refused this client: %s",
			ErrUnauthenticated, c.addr, strings.TrimPrefix(msg, ErrUnauthenticated.Error()+": "))
	}
	mac := body.take(macSize)
	if kind != respOK || body.end() != nil {
		return backend.Errorf(backend.CodeUnavailable, "tcp store: %s is not an intranode store server", c.addr)
	}
	if !validProof(c.secret, serverLabel, serverNonce, clientNonce, mac) {
		return backend.Errorf(backend.CodePeerFailed,
			"%w: server %s failed to prove it holds the job's secret; it may be an impostor", ErrUnauthenticated, c.addr)
	}
	return nil
}

// serverError decodes a respErr body into an error with the server's code.
func serverError(body *frameReader, op string) error {
	code, msg := backend.Code(body.u32()), body.str()
	if err := body.end(); err != nil {
		return backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store %s: malformed error response", op))
	}
	var cause error
	if code == backend.CodeTimeout {
		// The server waited out the deadline this client sent it.
		cause = context.DeadlineExceeded
	}
	return &backend.Error{Code: code, Msg: msg, Err: cause}
}

// read delivers responses to their callers until the connection ends.
func (c *TCP) read(r *bufio.Reader) {
	defer close(c.readerDone)
	for {
		n, err := readFrameHeader(r, c.opts.maxFrameSize)
		if err != nil {
			c.fail(backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store: connection to %s lost", c.addr)))
			return
		}
		p, err := readFrameBody(r, n)
		if err != nil {
			c.fail(backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store: connection to %s lost", c.addr)))
			return
		}
		kind, id, body, err := parseHeader(p)
		if err == nil && kind != respOK && kind != respErr {
			err = fmt.Errorf("unknown response kind 0x%02x", kind)
		}
		if err != nil {
			c.fail(backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store: bad response from %s", c.addr)))
			return
		}
		if id == 0 {
			// The server is closing the connection and says why.
			err := serverError(body, "connection")
			c.fail(backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store: server %s closed the connection", c.addr)))
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			<-c.slots
			ch <- tcpResponse{kind: kind, body: body}
		}
	}
}

// fail ends the connection with err, which every pending and later call
// returns.
func (c *TCP) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.done)
		c.opts.logger.Debug("tcp store: connection ended", "addr", c.addr, "err", err)
	}
	c.mu.Unlock()
	_ = c.conn.Close()
}

func (c *TCP) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// call sends one request and waits for its response. A slot is held from
// before the request is sent until its response arrives, even when the
// caller gives up first, so the client never has more requests on the
// server than the server allows.
func (c *TCP) call(ctx context.Context, op byte, key string, blocking bool, encode func(*frameWriter)) (*frameReader, error) {
	what := func() string { return fmt.Sprintf("tcp store %s %q", opNames[op], key) }
	ctx, cancel := withDeadline(ctx, c.opts.timeout)
	defer cancel()
	if err := c.failure(); err != nil {
		return nil, err
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.done:
		return nil, c.failure()
	case <-ctx.Done():
		return nil, timeoutError(ctx, what())
	}
	id := c.nextID.Add(1)
	w := newFrame(op, id)
	if blocking {
		deadline, _ := ctx.Deadline()
		w.i64(int64(time.Until(deadline)))
	}
	encode(w)
	if w.payloadLen() > c.opts.maxFrameSize {
		<-c.slots
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"%s: request of %d bytes exceeds the frame limit of %d", what(), w.payloadLen(), c.opts.maxFrameSize)
	}
	ch := make(chan tcpResponse, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		<-c.slots
		return nil, c.failure()
	}
	c.pending[id] = ch
	c.mu.Unlock()

	if n, err := c.send(ctx, w); err != nil {
		if n == 0 && (ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)) {
			// The deadline passed before a byte went out (a caller
			// whose deadline had already expired, say): the stream is
			// intact, so only this call fails, not the connection.
			c.mu.Lock()
			delete(c.pending, id)
			c.mu.Unlock()
			<-c.slots
			return nil, timeoutError(ctx, what())
		}
		// A partly written frame leaves the stream unusable.
		c.fail(backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store: write to %s", c.addr)))
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, timeoutError(ctx, what())
		}
		return nil, c.failure()
	}

	select {
	case resp := <-ch:
		if resp.kind == respErr {
			return nil, serverError(resp.body, opNames[op])
		}
		return resp.body, nil
	case <-c.done:
		return nil, c.failure()
	case <-ctx.Done():
		if blocking && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The server would wait out the deadline; tell it to stop now.
			// Its answer frees the slot.
			cw := newFrame(opCancel, id)
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			if _, err := c.send(cctx, cw); err != nil {
				c.fail(backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store: write to %s", c.addr)))
			}
			ccancel()
		}
		return nil, timeoutError(ctx, what())
	}
}

// send writes one frame by ctx's deadline and says how many bytes went
// out.
func (c *TCP) send(ctx context.Context, w *frameWriter) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	deadline, _ := ctx.Deadline()
	_ = c.conn.SetWriteDeadline(deadline)
	return c.conn.Write(w.bytes())
}

// decoded checks that a response body was consumed exactly.
func decoded(body *frameReader, op, key string) error {
	if err := body.end(); err != nil {
		return backend.Wrap(backend.CodePeerFailed, err, fmt.Sprintf("tcp store %s %q: malformed response", op, key))
	}
	return nil
}

// Set stores value under key.
func (c *TCP) Set(ctx context.Context, key string, value []byte) error {
	body, err := c.call(ctx, opSet, key, false, func(w *frameWriter) { w.str(key); w.blob(value) })
	if err != nil {
		return err
	}
	return decoded(body, "set", key)
}

// Get returns key's value, waiting on the server until it is set.
func (c *TCP) Get(ctx context.Context, key string) ([]byte, error) {
	body, err := c.call(ctx, opGet, key, true, func(w *frameWriter) { w.str(key) })
	if err != nil {
		return nil, err
	}
	v := body.blob()
	if err := decoded(body, "get", key); err != nil {
		return nil, err
	}
	return v, nil
}

// Wait blocks, on the server, until every key is set.
func (c *TCP) Wait(ctx context.Context, keys ...string) error {
	body, err := c.call(ctx, opWait, firstKey(keys), true, func(w *frameWriter) { w.strs(keys) })
	if err != nil {
		return err
	}
	return decoded(body, "wait", firstKey(keys))
}

// Add adds delta to the decimal counter at key.
func (c *TCP) Add(ctx context.Context, key string, delta int64) (int64, error) {
	body, err := c.call(ctx, opAdd, key, false, func(w *frameWriter) { w.str(key); w.i64(delta) })
	if err != nil {
		return 0, err
	}
	n := body.i64()
	return n, decoded(body, "add", key)
}

// CompareAndSet sets key to desired if it holds expected (missing equals an
// empty expected) and returns the value it holds afterwards.
func (c *TCP) CompareAndSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	body, err := c.call(ctx, opCAS, key, false, func(w *frameWriter) { w.str(key); w.blob(expected); w.blob(desired) })
	if err != nil {
		return nil, err
	}
	v := body.blob()
	if err := decoded(body, "compare-and-set", key); err != nil {
		return nil, err
	}
	return v, nil
}

// Check reports whether every key is set.
func (c *TCP) Check(ctx context.Context, keys ...string) (bool, error) {
	body, err := c.call(ctx, opCheck, firstKey(keys), false, func(w *frameWriter) { w.strs(keys) })
	if err != nil {
		return false, err
	}
	ok := body.u8() == 1
	return ok, decoded(body, "check", firstKey(keys))
}

// Delete removes key and reports whether it existed.
func (c *TCP) Delete(ctx context.Context, key string) (bool, error) {
	body, err := c.call(ctx, opDelete, key, false, func(w *frameWriter) { w.str(key) })
	if err != nil {
		return false, err
	}
	existed := body.u8() == 1
	return existed, decoded(body, "delete", key)
}

// Close closes the connection; pending and later calls fail with an error
// matching backend.ErrClosed. The server and its keys are unaffected.
// Closing twice is harmless.
func (c *TCP) Close() error {
	c.fail(backend.Errorf(backend.CodeClosed, "tcp store: client of %s is closed", c.addr))
	<-c.readerDone
	return nil
}

func firstKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
