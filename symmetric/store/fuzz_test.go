package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fuzzMaxFrame is the frame limit of the fuzz targets: small, so that the
// fuzzer reaches it, and so that memory bounds are easy to state.
const fuzzMaxFrame = 64 << 10

// requestFrames are well-formed frames of every kind, seeds for both fuzz
// targets.
func requestFrames() [][]byte {
	var frames [][]byte
	add := func(op byte, id uint64, body func(w *frameWriter)) {
		w := newFrame(op, id)
		body(w)
		frames = append(frames, w.bytes())
	}
	add(opSet, 1, func(w *frameWriter) { w.str("k"); w.blob([]byte("v")) })
	add(opGet, 2, func(w *frameWriter) { w.i64(int64(time.Millisecond)); w.str("k") })
	add(opGet, 3, func(w *frameWriter) { w.i64(int64(time.Millisecond)); w.str("missing") })
	add(opWait, 4, func(w *frameWriter) { w.i64(int64(time.Millisecond)); w.strs([]string{"k", "missing"}) })
	add(opAdd, 5, func(w *frameWriter) { w.str("n"); w.i64(-3) })
	add(opCAS, 6, func(w *frameWriter) { w.str("k"); w.blob([]byte("v")); w.blob([]byte("w")) })
	add(opCheck, 7, func(w *frameWriter) { w.strs([]string{"k", "n"}) })
	add(opDelete, 8, func(w *frameWriter) { w.str("k") })
	add(opCancel, 3, func(*frameWriter) {})
	add(respErr, 9, func(w *frameWriter) { w.u32(4); w.str("timeout") })
	return frames
}

// decodeFrame decodes one payload as the server (requests) or the client
// (error responses) does. For a payload that decodes completely it re-encodes
// the values and reports whether that reproduces the payload: decoder and
// encoder must agree on every frame the decoder accepts.
func decodeFrame(p []byte) (ok bool, roundTrip bool) {
	op, id, body, err := parseHeader(p)
	if err != nil {
		return false, false
	}
	w := newFrame(op, id)
	switch op {
	case opHello:
		magic, version := body.take(len(protocolMagic)), body.u32()
		w.b = append(w.b, magic...)
		w.u32(version)
	case opAuth:
		nonce, mac := body.take(nonceSize), body.take(macSize)
		w.b = append(append(w.b, nonce...), mac...)
	case opSet:
		key, value := body.str(), body.blob()
		w.str(key)
		w.blob(value)
	case opGet:
		timeout, key := body.i64(), body.str()
		w.i64(timeout)
		w.str(key)
	case opWait:
		timeout, keys := body.i64(), body.strs()
		w.i64(timeout)
		w.strs(keys)
	case opAdd:
		key, delta := body.str(), body.i64()
		w.str(key)
		w.i64(delta)
	case opCAS:
		key, expected, desired := body.str(), body.blob(), body.blob()
		w.str(key)
		w.blob(expected)
		w.blob(desired)
	case opCheck:
		keys := body.strs()
		w.strs(keys)
	case opDelete:
		w.str(body.str())
	case opCancel:
	case respErr:
		code, msg := body.u32(), body.str()
		w.u32(code)
		w.str(msg)
	default:
		return false, false
	}
	if body.end() != nil {
		return false, false
	}
	return true, bytes.Equal(w.bytes()[4:], p)
}

// FuzzFrameDecoder feeds arbitrary bytes to the frame reader and the
// request decoders. They must never panic, never allocate a body larger
// than the limit or than the bytes that arrived, and re-encode exactly
// whatever they accept.
func FuzzFrameDecoder(f *testing.F) {
	for _, fr := range requestFrames() {
		f.Add(fr)
	}
	f.Add(helloFrame(protocolVersion))
	f.Add(authFrame(jobSecret, bytes.Repeat([]byte{1}, nonceSize), bytes.Repeat([]byte{2}, nonceSize)))
	f.Add(lengthPrefix(0))
	f.Add(lengthPrefix(0xFFFFFFFF))
	f.Add(append(lengthPrefix(fuzzMaxFrame), 1, 2, 3))
	f.Add(append(lengthPrefix(13), opWait, 0, 0, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			n, err := readFrameHeader(r, fuzzMaxFrame)
			if err != nil {
				var tooLarge *frameTooLargeError
				require.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
					errors.Is(err, errFrameEmpty) || errors.As(err, &tooLarge), "unexpected header error %v", err)
				return
			}
			require.LessOrEqual(t, n, uint32(fuzzMaxFrame))
			left := r.Len()
			p, err := readFrameBody(r, n)
			if err != nil {
				require.ErrorIs(t, err, errTruncated)
				require.Less(t, left, int(n))
				return
			}
			require.Len(t, p, int(n))
			require.LessOrEqual(t, cap(p), max(int(n), bodyChunk)*2, "body buffer grew past what arrived")
			if ok, same := decodeFrame(p); ok {
				require.True(t, same, "frame %x decodes but does not re-encode to itself", p)
			}
		}
	})
}

// fuzzServer modes: how the fuzzer's bytes reach the server.
const (
	modeRaw           = iota // straight after connecting, to a server without a secret
	modeAfterHello           // after a good hello, to a server without a secret
	modeRawSecured           // straight after connecting, to a server with a secret
	modeAuthenticated        // after hello and a valid proof, to a server with a secret
	numModes
)

// FuzzServer feeds arbitrary bytes to a live server connection. The server
// must answer and hang up promptly once the client stops sending, must not
// crash or leak goroutines, must allocate no more than a small multiple of
// what it was sent, and must still serve a good client afterwards.
func FuzzServer(f *testing.F) {
	for _, fr := range requestFrames() {
		f.Add(uint8(modeAfterHello), fr)
		f.Add(uint8(modeAuthenticated), fr)
	}
	all := bytes.Join(requestFrames(), nil)
	f.Add(uint8(modeAfterHello), all)
	f.Add(uint8(modeAuthenticated), all)
	f.Add(uint8(modeRaw), helloFrame(protocolVersion))
	f.Add(uint8(modeRaw), append(helloFrame(protocolVersion), all...))
	f.Add(uint8(modeRawSecured), append(helloFrame(protocolVersion), all...))
	f.Add(uint8(modeRawSecured), helloFrame(protocolVersion+1))
	f.Add(uint8(modeAfterHello), lengthPrefix(0xFFFFFFFF))
	f.Add(uint8(modeAfterHello), append(lengthPrefix(fuzzMaxFrame), 1))
	f.Add(uint8(modeAuthenticated), authFrame(jobSecret, make([]byte, nonceSize), make([]byte, nonceSize)))
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		mode %= numModes
		secured := mode == modeRawSecured || mode == modeAuthenticated
		opts := []Option{WithTimeout(2 * time.Second), WithMaxFrameSize(fuzzMaxFrame), WithMaxKeys(64), WithMaxInflight(8)}
		clientOpts := []Option{WithSecret(nil)}
		if secured {
			opts = append(opts, WithSecret(jobSecret))
			clientOpts = []Option{WithSecret(jobSecret)}
		} else {
			opts = append(opts, WithSecret(nil))
		}
		goroutines := runtime.NumGoroutine()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)

		srv, err := ListenTCP("", opts...)
		require.NoError(t, err)
		c := rawDial(t, srv.Addr())
		switch mode {
		case modeAfterHello:
			c.hello()
		case modeAuthenticated:
			c.authenticate(jobSecret)
		}
		// The server may answer before it has read everything; write
		// while reading so neither side waits on the other.
		written := make(chan error, 1)
		go func() {
			_, err := c.conn.Write(data)
			if err == nil {
				err = c.conn.(*net.TCPConn).CloseWrite()
			}
			written <- err
		}()
		start := time.Now()
		_, err = io.Copy(io.Discard, c.r)
		if err != nil {
			// A reset is a hang-up too: the server closed with input
			// left unread.
			require.ErrorContains(t, err, "reset by peer")
		}
		require.Less(t, time.Since(start), 10*time.Second, "the server stalled")
		<-written
		_ = c.conn.Close()

		good, err := DialTCP(context.Background(), srv.Addr(), append(clientOpts, WithTimeout(10*time.Second))...)
		require.NoError(t, err, "a good client must still connect")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = good.Check(ctx, "anything")
		cancel()
		require.NoError(t, err)
		require.NoError(t, good.Close())
		require.LessOrEqual(t, srv.Len(), 64)

		closed := make(chan error, 1)
		go func() { closed <- srv.Close() }()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the server did not close")
		}
		runtime.ReadMemStats(&after)
		// Frames are bounded by fuzzMaxFrame and bodies grow only as their
		// bytes arrive; everything else is per-connection bookkeeping.
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20+16*len(data)),
			"the server allocated far more than it was sent")
		// Polled here rather than with require.Eventually, whose own
		// goroutine would be counted.
		for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > goroutines; {
			require.True(t, time.Now().Before(deadline), "%d goroutines left behind", runtime.NumGoroutine()-goroutines)
			time.Sleep(time.Millisecond)
		}
	})
}
