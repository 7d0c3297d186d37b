package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func newServer(t *testing.T, opts ...Option) *Server {
	t.Helper()
	srv, err := ListenTCP("", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

func dial(t *testing.T, addr string, opts ...Option) *TCP {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialTCP(ctx, addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// rawConn is a hand-driven connection for feeding the server bad input.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func rawDial(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	return &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_, err := c.conn.Write(b)
	require.NoError(c.t, err)
}

func helloFrame(version uint32) []byte {
	w := newFrame(opHello, 0)
	w.b = append(w.b, protocolMagic...)
	w.u32(version)
	return w.bytes()
}

func (c *rawConn) hello() {
	c.t.Helper()
	c.write(helloFrame(protocolVersion))
	kind, _, body := c.read()
	require.Equal(c.t, respOK, kind)
	require.Equal(c.t, uint32(protocolVersion), body.u32())
	require.Equal(c.t, byte(authNone), body.u8())
	require.NoError(c.t, body.end())
}

func (c *rawConn) read() (kind byte, id uint64, body *frameReader) {
	c.t.Helper()
	n, err := readFrameHeader(c.r, DefaultMaxFrameSize)
	require.NoError(c.t, err)
	p, err := readFrameBody(c.r, n)
	require.NoError(c.t, err)
	kind, id, body, err = parseHeader(p)
	require.NoError(c.t, err)
	return kind, id, body
}

// readError reads an error frame and returns its code and message.
func (c *rawConn) readError() (uint64, backend.Code, string) {
	c.t.Helper()
	kind, id, body := c.read()
	require.Equal(c.t, respErr, kind)
	code, msg := backend.Code(body.u32()), body.str()
	require.NoError(c.t, body.end())
	return id, code, msg
}

// requireClosed checks that the server hung up.
func (c *rawConn) requireClosed() {
	c.t.Helper()
	_, err := io.Copy(io.Discard, c.r)
	require.NoError(c.t, err, "the server must close the connection, not leave it open")
}

func lengthPrefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestListenTCPAddress(t *testing.T) {
	tests := []struct {
		addr     string
		wantHost string
		wantErr  error
	}{
		{"", "127.0.0.1", nil},
		{":0", "127.0.0.1", nil},
		{"127.0.0.1:0", "127.0.0.1", nil},
		{"localhost", "", backend.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.addr), func(t *testing.T) {
			srv, err := ListenTCP(tc.addr)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			defer srv.Close()
			host, port, err := net.SplitHostPort(srv.Addr())
			require.NoError(t, err)
			require.Equal(t, tc.wantHost, host)
			require.NotEqual(t, "0", port)
		})
	}
}

func TestTCPServerSurvivesBadClients(t *testing.T) {
	srv := newServer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	setFrame := func(id uint64) *frameWriter {
		w := newFrame(opSet, id)
		w.str("k")
		w.blob([]byte("v"))
		return w
	}
	tests := []struct {
		name      string
		hello     bool
		send      func(c *rawConn)
		wantError string // in the error frame, when one is expected
	}{
		{"random bytes", false, func(c *rawConn) { c.write(garbage) }, ""},
		{"random bytes after hello", true, func(c *rawConn) { c.write(garbage) }, ""},
		{"huge length", false, func(c *rawConn) { c.write(lengthPrefix(0xFFFFFFF0)) }, "exceeds the limit"},
		{"huge length after hello", true, func(c *rawConn) { c.write(lengthPrefix(DefaultMaxFrameSize + 1)) }, "exceeds the limit"},
		{"empty frame", true, func(c *rawConn) { c.write(lengthPrefix(0)) }, "empty frame"},
		{"short header", true, func(c *rawConn) { c.write(append(lengthPrefix(3), 1, 2, 3)) }, "shorter than"},
		{"truncated frame", true, func(c *rawConn) {
			c.write(append(lengthPrefix(100), make([]byte, 10)...))
			require.NoError(t, c.conn.(*net.TCPConn).CloseWrite())
		}, "truncated"},
		{"unknown opcode", true, func(c *rawConn) { c.write(newFrame(0x7f, 1).bytes()) }, "unknown opcode 0x7f"},
		{"malformed body", true, func(c *rawConn) {
			w := newFrame(opSet, 1)
			w.u32(1000) // a key length past the end of the frame
			c.write(w.bytes())
		}, "malformed set request"},
		{"trailing bytes", true, func(c *rawConn) {
			w := setFrame(1)
			w.u8(0)
			c.write(w.bytes())
		}, "trailing bytes"},
		{"request id zero", true, func(c *rawConn) { c.write(setFrame(0).bytes()) }, "reserved"},
		{"request before hello", false, func(c *rawConn) { c.write(setFrame(1).bytes()) }, "expected a hello"},
		{"wrong magic", false, func(c *rawConn) {
			w := newFrame(opHello, 0)
			w.b = append(w.b, "NOTSTORE"...)
			w.u32(protocolVersion)
			c.write(w.bytes())
		}, "not an intranode store client"},
		{"wait count past the frame", true, func(c *rawConn) {
			w := newFrame(opWait, 1)
			w.i64(int64(time.Second))
			w.u32(0xFFFFFFFF)
			c.write(w.bytes())
		}, "malformed wait request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, srv.Addr())
			if tc.hello {
				c.hello()
			}
			tc.send(c)
			if tc.wantError != "" {
				_, code, msg := c.readError()
				require.Equal(t, backend.CodeInvalidArgument, code)
				require.Contains(t, msg, tc.wantError)
			}
			c.requireClosed()
			requireUsableWith(t, srv)
		})
	}
}

func TestTCPHugeFrameIsNotAllocated(t *testing.T) {
	srv := newServer(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 8 {
		c := rawDial(t, srv.Addr())
		c.hello()
		// Within the limit, but the body never comes: only what arrives
		// may be allocated.
		c.write(append(lengthPrefix(DefaultMaxFrameSize-1), 1))
		require.NoError(t, c.conn.(*net.TCPConn).CloseWrite())
		_, _, msg := c.readError()
		require.Contains(t, msg, "truncated")
		c = rawDial(t, srv.Addr())
		c.write(lengthPrefix(0xFFFFFFFF))
		_, _, msg = c.readError()
		require.Contains(t, msg, "exceeds the limit")
	}
	runtime.ReadMemStats(&after)
	// Honouring the declared sizes would have allocated over 4 GiB.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20))
	requireUsableWith(t, srv)
}

func TestTCPProtocolVersionMismatch(t *testing.T) {
	srv := newServer(t)
	c := rawDial(t, srv.Addr())
	c.write(helloFrame(protocolVersion + 1))
	_, code, msg := c.readError()
	require.Equal(t, backend.CodeNotSupported, code)
	require.Contains(t, msg, "protocol version mismatch")
	c.requireClosed()
	requireUsableWith(t, srv)
}

func TestDialTCPErrors(t *testing.T) {
	// A port that was free a moment ago.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := ln.Addr().String()
	require.NoError(t, ln.Close())

	// A server that is not a store: it answers with text.
	notStore, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// A server that accepts and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 16)
	defer func() {
		_ = notStore.Close()
		_ = silent.Close()
		wg.Wait()
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	}()
	serve := func(ln net.Listener, handle func(net.Conn)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				handle(conn)
			}
		}()
	}
	serve(notStore, func(conn net.Conn) {
		_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		_ = conn.Close()
	})
	serve(silent, func(conn net.Conn) { conns <- conn })

	tests := []struct {
		name string
		addr string
		want error
	}{
		{"nothing listening", closedAddr, backend.ErrUnavailable},
		{"not a store", notStore.Addr().String(), backend.ErrUnavailable},
		{"silent server", silent.Addr().String(), backend.ErrTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := DialTCP(ctx, tc.addr)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestTCPServerDeathFailsPendingAndLaterCalls(t *testing.T) {
	srv, err := ListenTCP("")
	require.NoError(t, err)
	c := dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const pending = 4
	errc := make(chan error, pending)
	for i := range pending {
		go func() {
			_, err := c.Get(ctx, fmt.Sprintf("never/%d", i))
			errc <- err
		}()
	}
	require.Eventually(t, func() bool { return srv.mem.waiting() == pending }, 30*time.Second, time.Millisecond)
	require.NoError(t, srv.Close())
	requireDead := func(err error) {
		t.Helper()
		require.Error(t, err)
		require.True(t, errors.Is(err, backend.ErrPeerFailed) || errors.Is(err, backend.ErrClosed), "%v", err)
	}
	for range pending {
		requireDead(<-errc)
	}
	requireDead(c.Set(ctx, "k", nil))
	_, err = c.Get(ctx, "k")
	requireDead(err)
	require.NoError(t, srv.Close(), "closing twice is harmless")
}

func TestTCPDisconnectReleasesServerWaiters(t *testing.T) {
	srv := newServer(t)
	c, err := DialTCP(context.Background(), srv.Addr())
	require.NoError(t, err)
	ctx := context.Background() // the default timeout bounds these
	errc := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := c.Get(ctx, fmt.Sprintf("never/%d", i))
			errc <- err
		}()
	}
	require.Eventually(t, func() bool { return srv.mem.waiting() == 3 }, 30*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	for range 3 {
		require.ErrorIs(t, <-errc, backend.ErrClosed)
	}
	require.Eventually(t, func() bool { return srv.mem.waiting() == 0 }, 30*time.Second, time.Millisecond,
		"the server must stop waiting for a client that left")
}

func TestTCPCancelReleasesServerWaiter(t *testing.T) {
	srv := newServer(t)
	c := dial(t, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "never")
		errc <- err
	}()
	require.Eventually(t, func() bool { return srv.mem.waiting() == 1 }, 30*time.Second, time.Millisecond)
	cancel()
	err := <-errc
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return srv.mem.waiting() == 0 && len(c.slots) == 0 }, 30*time.Second, time.Millisecond,
		"a cancelled Get must stop waiting on the server and free its slot")
}

func TestTCPServerWaitsWithClientDeadline(t *testing.T) {
	srv := newServer(t)
	c := rawDial(t, srv.Addr())
	c.hello()
	w := newFrame(opGet, 7)
	w.i64(int64(10 * time.Millisecond))
	w.str("never")
	c.write(w.bytes())
	id, code, msg := c.readError()
	require.Equal(t, uint64(7), id)
	require.Equal(t, backend.CodeTimeout, code)
	require.Contains(t, msg, `"never"`)
}

func TestTCPMaxInflight(t *testing.T) {
	srv := newServer(t, WithMaxInflight(2))
	c := dial(t, srv.Addr()) // allows more than the server does
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := c.Get(ctx, fmt.Sprintf("later/%d", i))
			errc <- err
		}()
	}
	require.Eventually(t, func() bool { return srv.mem.waiting() == 2 }, 30*time.Second, time.Millisecond)
	_, err := c.Get(ctx, "later/2")
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, "too many blocking requests")
	// Requests that do not block are still served, and so are the waiters.
	for i := range 2 {
		require.NoError(t, c.Set(ctx, fmt.Sprintf("later/%d", i), nil))
	}
	for range 2 {
		require.NoError(t, <-errc)
	}
}

func TestTCPClientSlots(t *testing.T) {
	srv := newServer(t)
	c := dial(t, srv.Addr(), WithMaxInflight(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "first")
		got <- err
	}()
	require.Eventually(t, func() bool { return srv.mem.waiting() == 1 }, 30*time.Second, time.Millisecond)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, c.Set(short, "first", nil), backend.ErrTimeout, "no free slot before the deadline")
	other := dial(t, srv.Addr())
	require.NoError(t, other.Set(ctx, "first", nil))
	require.NoError(t, <-got)
	require.NoError(t, c.Set(ctx, "second", nil), "the slot is free again")
}

func TestTCPMaxKeys(t *testing.T) {
	srv := newServer(t, WithMaxKeys(3))
	c := dial(t, srv.Addr())
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, c.Set(ctx, fmt.Sprint(i), nil))
	}
	err := c.Set(ctx, "one too many", nil)
	require.ErrorIs(t, err, backend.ErrOutOfMemory)
	require.ErrorContains(t, err, "store is full (3 keys)")
	require.NoError(t, c.Set(ctx, "0", []byte("overwrite is fine")))
	require.Equal(t, 3, srv.Len())
}

func TestTCPFrameLimit(t *testing.T) {
	srv := newServer(t, WithMaxFrameSize(1024))
	ctx := context.Background()
	t.Run("client refuses to send", func(t *testing.T) {
		c := dial(t, srv.Addr(), WithMaxFrameSize(1024))
		err := c.Set(ctx, "big", make([]byte, 2000))
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		require.ErrorContains(t, err, "exceeds the frame limit")
		require.NoError(t, c.Set(ctx, "small", make([]byte, 100)), "the connection is still good")
	})
	t.Run("server refuses to read", func(t *testing.T) {
		c := dial(t, srv.Addr())
		err := c.Set(ctx, "big", make([]byte, 2000))
		require.ErrorIs(t, err, backend.ErrPeerFailed)
		require.ErrorContains(t, err, "exceeds the limit of 1024")
		requireUsableWith(t, srv)
	})
}

func TestTCPConcurrentCallsOnOneConnection(t *testing.T) {
	srv := newServer(t)
	reader, writer := dial(t, srv.Addr()), dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := reader.Get(ctx, fmt.Sprintf("k%d", i))
			if err == nil && string(v) != fmt.Sprint(i) {
				err = fmt.Errorf("key %d: got %q", i, v)
			}
			errs[i] = err
		}()
	}
	for i := n - 1; i >= 0; i-- {
		require.NoError(t, writer.Set(ctx, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i))))
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// TestTCPAdmission: 300 connections that never say hello. The server keeps
// at most MaxPendingPerAddr of them at a time (the oldest are closed as
// new ones come), closes the rest at the hello timeout, and a legitimate
// client is served meanwhile; past MaxConns, a client is refused with an
// error matching backend.ErrUnavailable. (Before admission control the
// 300 were all still open after 12 s: the hello deadline was the store's
// timeout capped at 30 s, and nothing bounded how many a client could
// hold.)
func TestTCPAdmission(t *testing.T) {
	const perAddr, hello = 16, 500 * time.Millisecond
	srv := newServer(t, WithAdmission(Admission{HelloTimeout: hello, MaxPending: 64, MaxPendingPerAddr: perAddr, MaxConns: 3}))
	silent := make([]*rawConn, 300)
	for i := range silent {
		silent[i] = rawDial(t, srv.Addr())
	}
	requireUsableWith(t, srv) // served while the silent ones wait

	// All but the newest perAddr were evicted at once; those go at the
	// hello timeout. Every one ends closed by the server.
	for _, c := range silent {
		c.requireClosed()
	}
	srv.mu.Lock()
	pending, served := len(srv.pending.order), srv.served
	srv.mu.Unlock()
	require.LessOrEqual(t, pending, perAddr)
	require.LessOrEqual(t, served, 1)

	// Two more clients fill MaxConns (the usable check's client is still
	// connected); the next is refused with an error frame.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial(t, srv.Addr())
	dial(t, srv.Addr())
	// A client's dial returns once the server has answered its hello; the
	// server counts it as served just after. Until both are counted, the
	// next client could take one's place and be served.
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.served == 3
	}, 10*time.Second, time.Millisecond)
	c, err := DialTCP(ctx, srv.Addr())
	if err == nil {
		// The refusal may arrive as the answer to the first request.
		err = c.Set(ctx, "k", nil)
		_ = c.Close()
	}
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.ErrorContains(t, err, "too many connections")
}

// TestTCPHandshakeBounds: what a connection sends before it has said hello
// and proved the secret is bounded in size and in time. A hello that
// declares 16 MiB is refused at its header (16 of them once pinned 512 MiB
// of heap), and a hello whose body stops after one byte is closed at the
// hello timeout, not held by the store's 5-minute timeout.
func TestTCPHandshakeBounds(t *testing.T) {
	secret := WithSecret([]byte("0123456789abcdef0123456789abcdef"))
	t.Run("huge hello", func(t *testing.T) {
		srv := newServer(t, secret)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const size = DefaultMaxFrameSize - 1
		var wg sync.WaitGroup
		for range 16 {
			c := rawDial(t, srv.Addr())
			wg.Go(func() {
				// All of the body but its last byte; the writes fail once
				// the server hangs up.
				_, _ = c.conn.Write(lengthPrefix(size))
				_, _ = c.conn.Write(make([]byte, size-1))
			})
			_, code, msg := c.readError()
			require.Equal(t, backend.CodeInvalidArgument, code)
			require.Contains(t, msg, "exceeds the limit")
		}
		wg.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		require.Less(t, int64(after.HeapInuse)-int64(before.HeapInuse), int64(16<<20))
		requireUsableWith(t, srv, secret)
	})
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"hello header and one byte", append(lengthPrefix(uint32(len(helloFrame(protocolVersion))-4)), opHello)},
		{"length prefix only", lengthPrefix(64)},
		{"half a length prefix", []byte{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The store's timeout is far longer than the test's 30 s
			// read deadline: only the hello timeout can close these.
			srv := newServer(t, secret, WithTimeout(time.Hour), WithAdmission(Admission{HelloTimeout: 200 * time.Millisecond}))
			c := rawDial(t, srv.Addr())
			c.write(tc.send)
			c.requireClosed()
			requireUsableWith(t, srv, secret)
		})
	}
	t.Run("proof header and one byte", func(t *testing.T) {
		srv := newServer(t, secret, WithTimeout(time.Hour), WithAdmission(Admission{HelloTimeout: 200 * time.Millisecond}))
		c := rawDial(t, srv.Addr())
		c.write(helloFrame(protocolVersion))
		kind, _, _ := c.read()
		require.Equal(t, respOK, kind)
		c.write(append(lengthPrefix(frameHeaderSize+nonceSize+macSize), opAuth))
		c.requireClosed()
	})
}

// TestTCPFlood opens many hostile connections of every kind at once (silent,
// garbage, huge declared hellos with a body streaming in, hellos cut short
// after one byte, proofs that never come) against a server with a secret
// and the default admission, and checks that the server's heap stays within
// 64 MiB of its start and that a legitimate client is still served; it logs
// how long that client's dial+Set+Get took. INTRANODE_STORE_FLOOD sets the
// number of connections (default 1000; docs/RELIABILITY.md: 10000).
func TestTCPFlood(t *testing.T) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("INTRANODE_STORE_FLOOD")); err == nil && v > 0 {
		n = v
	}
	// Each connection is two descriptors in this process (the server's
	// end is closed when evicted, but may not be yet); stay well inside
	// the limit, which Go raises to the hard limit at start.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && uint64(2*n+512) > lim.Cur {
		n = max(int(lim.Cur)/2-256, 64)
		t.Logf("descriptor limit %d: %d connections", lim.Cur, n)
	}
	secret := WithSecret([]byte("0123456789abcdef0123456789abcdef"))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	srv := newServer(t, secret)
	hello := helloFrame(protocolVersion)
	kinds := []func(c net.Conn){
		func(net.Conn) {}, // silent
		func(c net.Conn) { _, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) },
		func(c net.Conn) { _, _ = c.Write(append(lengthPrefix(DefaultMaxFrameSize-1), make([]byte, 32<<10)...)) },
		func(c net.Conn) { _, _ = c.Write(hello[:5]) },
		func(c net.Conn) { _, _ = c.Write(append(hello, lengthPrefix(frameHeaderSize+nonceSize+macSize)...)) },
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := range n {
		c, err := net.Dial("tcp", srv.Addr())
		require.NoError(t, err)
		require.NoError(t, c.SetWriteDeadline(time.Now().Add(time.Second)))
		kinds[i%len(kinds)](c)
		conns = append(conns, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c := dial(t, srv.Addr(), secret)
	require.NoError(t, c.Set(ctx, "k", []byte("v")))
	_, err := c.Get(ctx, "k")
	require.NoError(t, err)
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	srv.mu.Lock()
	pending := len(srv.pending.order)
	srv.mu.Unlock()
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d hostile connections: a legitimate dial+Set+Get took %v; heap in use %d -> %d MiB; server connections pending their hello: %d",
		n, took, before.HeapInuse>>20, after.HeapInuse>>20, pending)
	require.Less(t, grew, int64(64<<20), "the server's heap grew by %d MiB", grew>>20)
	require.LessOrEqual(t, pending, DefaultMaxPending)
}
