package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The TCP store's wire format. Every message is a frame: a 4-byte
// big-endian payload length, then the payload. A payload starts with a
// one-byte opcode (requests) or kind (responses) and an 8-byte big-endian
// request id; the rest depends on the opcode. Byte strings are a 4-byte
// big-endian length and the bytes; integers are big-endian.
//
// A connection opens with a hello exchange before any key is read or
// written: the client sends opHello with protocolMagic and its version; the
// server answers respOK with its version and an authentication method, or
// respErr and hangs up. With authNone the request loop starts at once. With
// authHMAC (the server has a per-job secret) the answer also carries the
// server's nonce, and the client must send its proof of the secret in an
// opAuth frame and check the server's proof in return before the request
// loop starts (auth.go describes the exchange).
//
// Requests (id > 0, chosen by the client, unique among its in-flight ones):
//
//	opSet     key, value                      -> respOK
//	opGet     timeout(int64 ns), key          -> respOK value
//	opWait    timeout(int64 ns), n(u32), keys -> respOK
//	opAdd     key, delta(int64)               -> respOK value(int64)
//	opCAS     key, expected, desired          -> respOK value
//	opCheck   n(u32), keys                    -> respOK set(u8)
//	opDelete  key                             -> respOK existed(u8)
//	opCancel  (id names the request to cancel; no response of its own)
//
// Any request may instead get respErr: code(u32), message. A respErr with
// id 0 concerns the whole connection, which the server closes after it.
const (
	protocolMagic   = "INSTORE\x00"
	protocolVersion = 1
	authNone        = 0
)

const (
	opHello  byte = 0x01
	opSet    byte = 0x02
	opGet    byte = 0x03
	opWait   byte = 0x04
	opAdd    byte = 0x05
	opCAS    byte = 0x06
	opCheck  byte = 0x07
	opDelete byte = 0x08
	opCancel byte = 0x09

	respOK  byte = 0x80
	respErr byte = 0x81
)

var opNames = map[byte]string{
	opHello: "hello", opSet: "set", opGet: "get", opWait: "wait", opAdd: "add",
	opCAS: "compare-and-set", opCheck: "check", opDelete: "delete", opCancel: "cancel", opAuth: "auth",
}

// frameHeaderSize is the opcode and the request id.
const frameHeaderSize = 1 + 8

// maxHandshakeFrame bounds every frame a server reads before the
// connection has said hello and, with a secret, proved it: the hello is 21
// bytes and the proof 73, so a connection that has not authenticated can
// make the server hold no more than this (and the connection's read
// buffer), whatever it declares.
const maxHandshakeFrame = 1 << 10

// bodyChunk is how much of a frame's body is allocated before its bytes
// arrive: a peer that declares a large frame and sends nothing costs this
// much, not the declared size.
const bodyChunk = 64 << 10

var (
	errFrameEmpty = errors.New("empty frame")
	errTruncated  = errors.New("truncated frame")
)

// frameTooLargeError reports a declared length over the limit.
type frameTooLargeError struct{ size, max uint32 }

// Error describes the refused frame.
func (e *frameTooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes exceeds the limit of %d", e.size, e.max)
}

// readFrameHeader reads a frame's length and checks it against max before
// anything is allocated for the body.
func readFrameHeader(r io.Reader, max int) (uint32, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n == 0:
		return 0, errFrameEmpty
	case uint64(n) > uint64(max):
		return 0, &frameTooLargeError{size: n, max: uint32(min(max, math.MaxUint32))}
	}
	return n, nil
}

// readFrameBody reads n bytes, growing the buffer as they arrive.
func readFrameBody(r io.Reader, n uint32) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(n, bodyChunk)))
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errTruncated
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// frameWriter builds one frame, its length filled in by bytes.
type frameWriter struct{ b []byte }

func newFrame(op byte, id uint64) *frameWriter {
	w := &frameWriter{b: make([]byte, 4, 64)}
	w.u8(op)
	w.u64(id)
	return w
}

func (w *frameWriter) u8(v byte)     { w.b = append(w.b, v) }
func (w *frameWriter) u32(v uint32)  { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *frameWriter) u64(v uint64)  { w.b = binary.BigEndian.AppendUint64(w.b, v) }
func (w *frameWriter) i64(v int64)   { w.u64(uint64(v)) }
func (w *frameWriter) str(s string)  { w.u32(uint32(len(s))); w.b = append(w.b, s...) }
func (w *frameWriter) blob(b []byte) { w.u32(uint32(len(b))); w.b = append(w.b, b...) }

func (w *frameWriter) strs(keys []string) {
	w.u32(uint32(len(keys)))
	for _, k := range keys {
		w.str(k)
	}
}

// payloadLen is the size the frame will declare.
func (w *frameWriter) payloadLen() int { return len(w.b) - 4 }

// bytes returns the frame, length prefix included.
func (w *frameWriter) bytes() []byte {
	binary.BigEndian.PutUint32(w.b[:4], uint32(w.payloadLen()))
	return w.b
}

// frameReader decodes a payload. The first error sticks; later reads
// return zero values, so a decoder checks err once at the end.
type frameReader struct {
	b   []byte
	err error
}

func (r *frameReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errTruncated
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *frameReader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *frameReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *frameReader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *frameReader) i64() int64 { return int64(r.u64()) }

func (r *frameReader) blob() []byte {
	n := r.u32()
	if uint64(n) > uint64(len(r.b)) {
		r.fail(errTruncated)
		return nil
	}
	return r.take(int(n))
}

func (r *frameReader) str() string { return string(r.blob()) }

// strs reads a counted list of strings. The count is checked against the
// bytes left (each string needs at least its 4-byte length) before the
// slice is allocated.
func (r *frameReader) strs() []string {
	n := r.u32()
	if uint64(n)*4 > uint64(len(r.b)) {
		r.fail(errTruncated)
		return nil
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = r.str()
	}
	return keys
}

func (r *frameReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// end reports the first decoding error, or trailing bytes.
func (r *frameReader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return r.err
}

// parseHeader splits a payload into its opcode, request id and body.
func parseHeader(p []byte) (op byte, id uint64, body *frameReader, err error) {
	if len(p) < frameHeaderSize {
		return 0, 0, nil, fmt.Errorf("payload of %d bytes is shorter than the %d-byte header", len(p), frameHeaderSize)
	}
	return p[0], binary.BigEndian.Uint64(p[1:9]), &frameReader{b: p[frameHeaderSize:]}, nil
}
