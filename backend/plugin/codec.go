//go:build linux

package plugin

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"sync"

	"google.golang.org/grpc/encoding"

	"github.com/intranode/intranode/backend"
)

// codecName is the gRPC content subtype of the protocol's messages.
const codecName = "intranode-gob"

func init() {
	encoding.RegisterCodec(newGobCodec())
}

// gobCodec encodes the protocol's Go structs with encoding/gob. Both ends of
// the protocol are this package, so a Go-native encoding needs no schema
// compiler and no generated code; byte slices (copies, fabric handles) travel
// as they are, without the base64 of JSON.
//
// Every message is a whole gob stream: the definitions of its type, then
// its value. A fresh gob.Encoder and Decoder per message would build their
// type machinery each time (most of a small message's cost), so the codec
// keeps, per type, encoders that have already sent the definitions (it
// writes those bytes, which the encoder kept, ahead of each value) and
// decoders that have read the same definitions bytes in an earlier message
// (they read only the value). The bytes on the wire are those of a fresh
// encoder.
type gobCodec struct {
	enc, dec sync.Map // reflect.Type → *sync.Pool of primed streams, *typeDecoders
}

func newGobCodec() *gobCodec { return &gobCodec{} }

// typeDecoders are idle decoders of one type that have read defs.
type typeDecoders struct {
	mu   sync.Mutex
	defs []byte
	idle []*gobStream
}

// maxIdleDecoders bounds the decoders kept per type (one per call in
// flight is enough).
const maxIdleDecoders = 16

// gobStream is one encoder or decoder with the buffer it works on; an
// encoder's defs are the type definitions it sent before its first value.
type gobStream struct {
	buf  bytes.Buffer
	r    bytes.Reader
	enc  *gob.Encoder
	dec  *gob.Decoder
	defs []byte
}

// Marshal encodes v; the empty message is no bytes (gob refuses structs
// without fields).
func (c *gobCodec) Marshal(v any) ([]byte, error) {
	if _, ok := v.(*empty); ok {
		return nil, nil
	}
	pool := load[sync.Pool](&c.enc, reflect.TypeOf(v))
	s, _ := pool.Get().(*gobStream)
	var err error
	if s == nil {
		s, err = primed(v)
	}
	if err == nil {
		s.buf.Reset()
		err = s.enc.Encode(v)
	}
	if err != nil {
		return nil, backend.Errorf(backend.CodeInternal, "plugin: encoding %T: %w", v, err)
	}
	out := make([]byte, 0, len(s.defs)+s.buf.Len())
	out = append(append(out, s.defs...), s.buf.Bytes()...)
	if s.buf.Cap() <= 4*copyChunk {
		pool.Put(s)
	}
	return out, nil
}

// primed returns a stream whose encoder has sent the definitions of v's
// type: all of its first output but the value message, which a second
// Encode writes alone.
func primed(v any) (*gobStream, error) {
	s := &gobStream{}
	s.enc = gob.NewEncoder(&s.buf)
	if err := s.enc.Encode(v); err != nil {
		return nil, err
	}
	first := bytes.Clone(s.buf.Bytes())
	s.buf.Reset()
	if err := s.enc.Encode(v); err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(first, s.buf.Bytes()) {
		return nil, backend.Errorf(backend.CodeInternal, "gob wrote a value differently the second time")
	}
	s.defs = first[:len(first)-s.buf.Len()]
	return s, nil
}

// Unmarshal decodes data into v.
func (c *gobCodec) Unmarshal(data []byte, v any) error {
	if _, ok := v.(*empty); ok {
		return nil
	}
	td := load[typeDecoders](&c.dec, reflect.TypeOf(v))
	n, framed := lastMessage(data)
	defs := data[:n]
	var s *gobStream
	td.mu.Lock()
	if k := len(td.idle); framed && k > 0 && bytes.Equal(td.defs, defs) {
		s, td.idle = td.idle[k-1], td.idle[:k-1]
	}
	td.mu.Unlock()
	if s != nil {
		s.r.Reset(data[n:])
	} else {
		s = &gobStream{}
		s.r.Reset(data)
		s.dec = gob.NewDecoder(&s.r)
	}
	if err := s.dec.Decode(v); err != nil {
		return backend.Errorf(backend.CodeInternal, "plugin: decoding %T: %w", v, err)
	}
	if !framed || s.r.Len() != 0 {
		return nil
	}
	td.mu.Lock()
	if !bytes.Equal(td.defs, defs) {
		td.defs, td.idle = bytes.Clone(defs), td.idle[:0]
	}
	if len(td.idle) < maxIdleDecoders {
		td.idle = append(td.idle, s)
	}
	td.mu.Unlock()
	return nil
}

// lastMessage returns where the last message of the gob stream data
// starts (each message is its length, a gob unsigned integer, then that
// many bytes); ok is false when data is not a sequence of whole messages.
func lastMessage(data []byte) (start int, ok bool) {
	for i := 0; i < len(data); {
		n, w := 0, 1
		switch b := data[i]; {
		case b < 0x80:
			n = int(b)
		case -int(int8(b)) <= 8 && i-int(int8(b)) < len(data):
			w += -int(int8(b))
			for _, d := range data[i+1 : i+w] {
				n = n<<8 | int(d)
			}
		default:
			return 0, false
		}
		if n < 0 || n > len(data)-i-w {
			return 0, false
		}
		start, ok = i, true
		i += w + n
	}
	return start, ok
}

// load returns m's value for t, storing a new one the first time.
func load[T any](m *sync.Map, t reflect.Type) *T {
	if v, ok := m.Load(t); ok {
		return v.(*T)
	}
	v, _ := m.LoadOrStore(t, new(T))
	return v.(*T)
}

// Name is the content subtype.
func (*gobCodec) Name() string { return codecName }
