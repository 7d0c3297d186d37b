package store

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

// TestMain keeps the tests hermetic: a secret in the caller's environment
// would otherwise secure every server and client they create.
func TestMain(m *testing.M) {
	_ = os.Unsetenv(EnvSecret)
	os.Exit(m.Run())
}

var (
	jobSecret   = []byte("0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
)

// challenge reads a secured server's answer to the hello and returns its
// nonce.
func (c *rawConn) challenge() []byte {
	c.t.Helper()
	c.write(helloFrame(protocolVersion))
	kind, _, body := c.read()
	require.Equal(c.t, respOK, kind)
	require.Equal(c.t, uint32(protocolVersion), body.u32())
	require.Equal(c.t, byte(authHMAC), body.u8())
	nonce := body.take(nonceSize)
	require.NoError(c.t, body.end())
	return nonce
}

// authFrame is a client's proof of secret for serverNonce.
func authFrame(secret, serverNonce, clientNonce []byte) []byte {
	w := newFrame(opAuth, 0)
	w.b = append(w.b, clientNonce...)
	w.b = append(w.b, proof(secret, clientLabel, serverNonce, clientNonce)...)
	return w.bytes()
}

// authenticate completes the exchange by hand, checking the server's proof.
func (c *rawConn) authenticate(secret []byte) {
	c.t.Helper()
	serverNonce := c.challenge()
	clientNonce := bytes.Repeat([]byte{7}, nonceSize)
	c.write(authFrame(secret, serverNonce, clientNonce))
	kind, id, body := c.read()
	require.Equal(c.t, respOK, kind)
	require.Zero(c.t, id)
	mac := body.take(macSize)
	require.NoError(c.t, body.end())
	require.True(c.t, validProof(secret, serverLabel, serverNonce, clientNonce, mac), "the server proves the secret")
}

func TestTCPAuthentication(t *testing.T) {
	tests := []struct {
		name      string
		server    []Option
		client    []Option
		env       string // EnvSecret while both are built
		wantErr   error  // besides ErrUnauthenticated; nil: the client works
		wantInMsg string
	}{
		{name: "same secret", server: []Option{WithSecret(jobSecret)}, client: []Option{WithSecret(jobSecret)}},
		{name: "neither has a secret"},
		{name: "secret from the environment", env: string(jobSecret)},
		{name: "server by option, client by environment", server: []Option{WithSecret(jobSecret)}, env: string(jobSecret)},
		{name: "empty option overrides the environment", server: []Option{WithSecret(nil)}, client: []Option{WithSecret(nil)},
			env: string(jobSecret)},
		{name: "client without a secret", server: []Option{WithSecret(jobSecret)},
			wantErr: backend.ErrInvalidArgument, wantInMsg: "requires the job's secret; set " + EnvSecret},
		{name: "client with the wrong secret", server: []Option{WithSecret(jobSecret)}, client: []Option{WithSecret(otherSecret)},
			wantErr: backend.ErrInvalidArgument, wantInMsg: "does not match this job's secret"},
		{name: "server without a secret", client: []Option{WithSecret(jobSecret)},
			wantErr: backend.ErrInvalidArgument, wantInMsg: "does not authenticate its clients"},
		{name: "server without a secret, client by environment", server: []Option{WithSecret(nil)}, env: string(jobSecret),
			wantErr: backend.ErrInvalidArgument, wantInMsg: "does not authenticate its clients"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvSecret, tc.env)
			srv := newServer(t, tc.server...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := DialTCP(ctx, srv.Addr(), tc.client...)
			if tc.wantErr == nil {
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.Set(ctx, "k", []byte("v")))
				v, err := c.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, "v", string(v))
				return
			}
			require.Nil(t, c)
			require.ErrorIs(t, err, ErrUnauthenticated)
			require.ErrorIs(t, err, tc.wantErr)
			require.ErrorContains(t, err, tc.wantInMsg)
			require.ErrorContains(t, err, srv.Addr(), "the error names the server")
			require.Zero(t, srv.Len())
		})
	}
}

// TestTCPUnauthenticatedClientGetsNothing drives a secured server by hand
// with everything but a valid proof: each attempt gets one error frame,
// is disconnected, reads no key and writes none.
func TestTCPUnauthenticatedClientGetsNothing(t *testing.T) {
	srv := newServer(t, WithSecret(jobSecret))
	good := dial(t, srv.Addr(), WithSecret(jobSecret))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const treasure = "the-value-nobody-else-may-read"
	require.NoError(t, good.Set(ctx, "treasure", []byte(treasure)))

	getFrame := func() []byte {
		w := newFrame(opGet, 1)
		w.i64(int64(time.Second))
		w.str("treasure")
		return w.bytes()
	}
	setFrame := func() []byte {
		w := newFrame(opSet, 1)
		w.str("planted")
		w.blob([]byte("x"))
		return w.bytes()
	}
	var replay []byte // a valid proof, but for another connection's nonce
	{
		c := rawDial(t, srv.Addr())
		replay = authFrame(jobSecret, c.challenge(), bytes.Repeat([]byte{1}, nonceSize))
	}
	tests := []struct {
		name      string
		send      func(c *rawConn, serverNonce []byte)
		wantInMsg string // empty: the connection just closes
	}{
		{"get instead of proof", func(c *rawConn, _ []byte) { c.write(getFrame()) }, "sent opcode 0x03 instead of its proof"},
		{"set instead of proof", func(c *rawConn, _ []byte) { c.write(setFrame()) }, "sent opcode 0x02 instead of its proof"},
		{"wrong secret", func(c *rawConn, n []byte) {
			c.write(authFrame(otherSecret, n, bytes.Repeat([]byte{2}, nonceSize)))
		}, "does not match this job's secret"},
		{"empty proof", func(c *rawConn, _ []byte) { c.write(newFrame(opAuth, 0).bytes()) }, "malformed proof (0 bytes, id 0)"},
		{"proof with a request id", func(c *rawConn, n []byte) {
			f := authFrame(jobSecret, n, bytes.Repeat([]byte{3}, nonceSize))
			f[4+8] = 1 // the id's low byte: the frame is no longer a proof
			c.write(f)
		}, "malformed proof (64 bytes, id 1)"},
		{"replayed proof", func(c *rawConn, _ []byte) { c.write(replay) }, "does not match this job's secret"},
		{"proof, then a get, in one write", func(c *rawConn, _ []byte) {
			c.write(append(append([]byte(nil), replay...), getFrame()...))
		}, "does not match this job's secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, srv.Addr())
			tc.send(c, c.challenge())
			rest, err := readAll(c)
			require.NoError(t, err)
			require.NotContains(t, string(rest), treasure)
			if tc.wantInMsg != "" {
				r := &rawConn{t: t, r: bufio.NewReader(bytes.NewReader(rest))}
				id, code, msg := r.readError()
				require.Zero(t, id)
				require.Equal(t, backend.CodeInvalidArgument, code)
				require.Contains(t, msg, ErrUnauthenticated.Error())
				require.Contains(t, msg, tc.wantInMsg)
				_, err := r.r.Peek(1)
				require.Error(t, err, "one error frame and nothing else")
			}
			ok, err := good.Check(ctx, "planted")
			require.NoError(t, err)
			require.False(t, ok, "nothing an unauthenticated client sends is written")
		})
	}
	v, err := good.Get(ctx, "treasure")
	require.NoError(t, err)
	require.Equal(t, treasure, string(v), "the authenticated client is undisturbed")
}

// readAll reads what the server sends until it hangs up.
func readAll(c *rawConn) ([]byte, error) {
	var out bytes.Buffer
	_, err := out.ReadFrom(c.r)
	return out.Bytes(), err
}

func TestTCPAuthenticatedRawClient(t *testing.T) {
	srv := newServer(t, WithSecret(jobSecret))
	c := rawDial(t, srv.Addr())
	c.authenticate(jobSecret)
	w := newFrame(opSet, 5)
	w.str("k")
	w.blob([]byte("v"))
	c.write(w.bytes())
	kind, id, body := c.read()
	require.Equal(t, respOK, kind)
	require.Equal(t, uint64(5), id)
	require.NoError(t, body.end())
	require.Equal(t, 1, srv.Len())
}

// TestTCPSilentClientAfterChallenge checks that a client that stops after
// the hello is cut off at the handshake deadline rather than held open.
func TestTCPSilentClientAfterChallenge(t *testing.T) {
	srv := newServer(t, WithSecret(jobSecret), WithTimeout(200*time.Millisecond),
		WithAdmission(Admission{HelloTimeout: 500 * time.Millisecond}))
	c := rawDial(t, srv.Addr())
	start := time.Now()
	c.challenge()
	c.requireClosed()
	require.Less(t, time.Since(start), 10*time.Second)
	requireUsableWith(t, srv, WithSecret(jobSecret))
}

// requireUsableWith checks that a client with opts (none: a well-behaved
// client) can use srv.
func requireUsableWith(t *testing.T, srv *Server, opts ...Option) {
	t.Helper()
	c := dial(t, srv.Addr(), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Set(ctx, "still", []byte("usable")))
	v, err := c.Get(ctx, "still")
	require.NoError(t, err)
	require.Equal(t, "usable", string(v))
}

// impostor is a listener that speaks just enough of the protocol to
// challenge a client, then answers as answer says, recording every frame
// the client sends.
type impostor struct {
	ln     net.Listener
	mu     sync.Mutex
	frames [][]byte
	wg     sync.WaitGroup
}

func newImpostor(t *testing.T, answer func(conn net.Conn, r *bufio.Reader, imp *impostor)) *impostor {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	imp := &impostor{ln: ln}
	imp.wg.Add(1)
	go func() {
		defer imp.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			answer(conn, bufio.NewReader(conn), imp)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		imp.wg.Wait()
	})
	return imp
}

// next reads one frame from the client and records it.
func (imp *impostor) next(r *bufio.Reader) ([]byte, bool) {
	n, err := readFrameHeader(r, DefaultMaxFrameSize)
	if err != nil {
		return nil, false
	}
	p, err := readFrameBody(r, n)
	if err != nil {
		return nil, false
	}
	imp.mu.Lock()
	imp.frames = append(imp.frames, p)
	imp.mu.Unlock()
	return p, true
}

func (imp *impostor) ops() []byte {
	imp.mu.Lock()
	defer imp.mu.Unlock()
	var ops []byte
	for _, f := range imp.frames {
		ops = append(ops, f[0])
	}
	return ops
}

// TestTCPClientRefusesImpostors runs a client with the secret against
// servers that do not hold it: it must fail the handshake and never send a
// request.
func TestTCPClientRefusesImpostors(t *testing.T) {
	challenge := func(conn net.Conn, r *bufio.Reader, imp *impostor) ([]byte, []byte, bool) {
		if _, ok := imp.next(r); !ok {
			return nil, nil, false
		}
		serverNonce := bytes.Repeat([]byte{9}, nonceSize)
		w := newFrame(respOK, 0)
		w.u32(protocolVersion)
		w.u8(authHMAC)
		w.b = append(w.b, serverNonce...)
		_, _ = conn.Write(w.bytes())
		p, ok := imp.next(r)
		if !ok || len(p) != frameHeaderSize+nonceSize+macSize {
			return nil, nil, false
		}
		return serverNonce, p[frameHeaderSize:], true
	}
	tests := []struct {
		name   string
		answer func(conn net.Conn, r *bufio.Reader, imp *impostor)
		want   error
		inMsg  string
	}{
		{"claims no authentication", func(conn net.Conn, r *bufio.Reader, imp *impostor) {
			imp.next(r)
			w := newFrame(respOK, 0)
			w.u32(protocolVersion)
			w.u8(authNone)
			_, _ = conn.Write(w.bytes())
			imp.next(r)
		}, backend.ErrInvalidArgument, "does not authenticate its clients"},
		{"reflects the client's proof", func(conn net.Conn, r *bufio.Reader, imp *impostor) {
			_, auth, ok := challenge(conn, r, imp)
			if !ok {
				return
			}
			w := newFrame(respOK, 0)
			w.b = append(w.b, auth[nonceSize:]...)
			_, _ = conn.Write(w.bytes())
			imp.next(r)
		}, backend.ErrPeerFailed, "failed to prove it holds the job's secret"},
		{"answers with a wrong proof", func(conn net.Conn, r *bufio.Reader, imp *impostor) {
			serverNonce, auth, ok := challenge(conn, r, imp)
			if !ok {
				return
			}
			w := newFrame(respOK, 0)
			w.b = append(w.b, proof(otherSecret, serverLabel, serverNonce, auth[:nonceSize])...)
			_, _ = conn.Write(w.bytes())
			imp.next(r)
		}, backend.ErrPeerFailed, "may be an impostor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			imp := newImpostor(t, tc.answer)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := DialTCP(ctx, imp.ln.Addr().String(), WithSecret(jobSecret))
			require.Nil(t, c)
			require.ErrorIs(t, err, ErrUnauthenticated)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.inMsg)
			require.Eventually(t, func() bool { return len(imp.ops()) > 0 }, 10*time.Second, time.Millisecond)
			for _, op := range imp.ops() {
				require.Contains(t, []byte{opHello, opAuth}, op, "the client sent a request to an impostor")
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	require.NoError(t, err)
	b, err := NewSecret()
	require.NoError(t, err)
	require.Len(t, a, 64)
	require.NotEqual(t, a, b)
	require.Empty(t, strings.Trim(a, "0123456789abcdef"))
}

func TestWithSecretCopiesItsArgument(t *testing.T) {
	secret := append([]byte(nil), jobSecret...)
	srv := newServer(t, WithSecret(secret))
	opt := WithSecret(secret)
	secret[0] ^= 0xff // a caller reusing its buffer must not change the job's secret
	requireUsableWith(t, srv, opt)
}
