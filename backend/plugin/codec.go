//go:build linux

package plugin

import (
	"bytes"
	"encoding/gob"

	"google.golang.org/grpc/encoding"

	"github.com/intranode/intranode/backend"
)

// codecName is the gRPC content subtype of the protocol's messages.
const codecName = "intranode-gob"

func init() {
	encoding.RegisterCodec(gobCodec{})
}

// gobCodec encodes the protocol's Go structs with encoding/gob. Both ends of
// the protocol are this package, so a Go-native encoding needs no schema
// compiler and no generated code; byte slices (copies, fabric handles) travel
// as they are, without the base64 of JSON.
type gobCodec struct{}

// Marshal encodes v; the empty message is no bytes (gob refuses structs
// without fields).
func (gobCodec) Marshal(v any) ([]byte, error) {
	if _, ok := v.(*empty); ok {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, backend.Errorf(backend.CodeInternal, "plugin: encoding %T: %w", v, err)
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes data into v.
func (gobCodec) Unmarshal(data []byte, v any) error {
	if _, ok := v.(*empty); ok {
		return nil
	}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return backend.Errorf(backend.CodeInternal, "plugin: decoding %T: %w", v, err)
	}
	return nil
}

// Name is the content subtype.
func (gobCodec) Name() string { return codecName }
