//go:build linux

package plugin

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/intranode/intranode/backend"
)

func TestStatusRoundTrip(t *testing.T) {
	for code := range backend.CodeInternal + 1 {
		t.Run(code.String(), func(t *testing.T) {
			orig := backend.Errorf(code, "fake: something about %d", 42)
			st := toStatus(fmt.Errorf("context: %w", orig))
			require.Equal(t, grpcCodes[code], status.Code(st))
			back, ok := fromStatus(st)
			require.True(t, ok)
			require.Equal(t, code, backend.CodeOf(back))
			require.Equal(t, "context: fake: something about 42", back.Error())
			if code != backend.CodeUnknown {
				require.ErrorIs(t, back, &backend.Error{Code: code})
			}
		})
	}
	// A status the server did not make (a broken connection) is not a
	// backend error.
	_, ok := fromStatus(status.Error(codes.Unavailable, "connection closed"))
	require.False(t, ok)
	_, ok = fromStatus(errors.New("plain"))
	require.False(t, ok)
}

func TestCodecEmptyAndValues(t *testing.T) {
	c := newGobCodec()
	b, err := c.Marshal(&empty{})
	require.NoError(t, err)
	require.Empty(t, b)
	require.NoError(t, c.Unmarshal(nil, &empty{}))

	in := &launchReq{Stream: 3, Func: 4, Grid: backend.D1(2), Block: backend.D1(32),
		Args: []wireArg{{Size: 4, Bits: 7}, {Size: 8, Bits: 1 << 40}}}
	b, err = c.Marshal(in)
	require.NoError(t, err)
	var out launchReq
	require.NoError(t, c.Unmarshal(b, &out))
	require.Equal(t, *in, out)
	require.ErrorIs(t, c.Unmarshal([]byte("junk"), &out), backend.ErrInternal)

	// Later messages of a type go through encoders and decoders that have
	// the definitions already; the bytes are still a whole gob stream, which
	// a fresh gob decoder (a plugin of an earlier build) reads, and streams
	// of a fresh gob encoder decode as before.
	for i := range 5 {
		in.Args = append(in.Args, wireArg{Size: 4, Bits: uint64(i)})
		b, err = c.Marshal(in)
		require.NoError(t, err)
		var fresh, back launchReq
		require.NoError(t, gob.NewDecoder(bytes.NewReader(b)).Decode(&fresh))
		require.Equal(t, *in, fresh)
		require.NoError(t, c.Unmarshal(b, &back))
		require.Equal(t, *in, back)

		var buf bytes.Buffer
		require.NoError(t, gob.NewEncoder(&buf).Encode(in))
		back = launchReq{}
		require.NoError(t, c.Unmarshal(buf.Bytes(), &back))
		require.Equal(t, *in, back)
	}
	require.ErrorIs(t, c.Unmarshal(b[:len(b)-1], &out), backend.ErrInternal)
}

// BenchmarkCodec is one request's encoding and decoding: a kernel launch
// (the plugin's most frequent call) and a 1 MiB copy chunk.
func BenchmarkCodec(b *testing.B) {
	launch := &launchReq{Stream: 3, Func: 4, Grid: backend.D1(2), Block: backend.D1(512),
		Args: []wireArg{{Size: 8, Bits: 1}, {Size: 8, Bits: 2}, {Size: 8, Bits: 3}, {Size: 4, Bits: 4}, {Size: 4, Bits: 5}}}
	chunk := &copyToReq{Dev: 1, Dst: 1 << 20, Data: make([]byte, copyChunk)}
	for _, tc := range []struct {
		name string
		in   any
		out  func() any
	}{
		{"launch", launch, func() any { return new(launchReq) }},
		{"copy-1MiB", chunk, func() any { return new(copyToReq) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newGobCodec()
			b.ReportAllocs()
			for b.Loop() {
				data, err := c.Marshal(tc.in)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Unmarshal(data, tc.out()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGobLastMessage checks the framing of gob streams that the codec's
// decoders rely on: lengths of one byte and of several.
func TestGobLastMessage(t *testing.T) {
	long := append([]byte{0xfe, 0x01, 0x00}, make([]byte, 256)...)
	for _, tc := range []struct {
		name  string
		data  []byte
		start int
		ok    bool
	}{
		{"empty", nil, 0, false},
		{"one", []byte{2, 9, 9}, 0, true},
		{"two", []byte{1, 7, 2, 9, 9}, 2, true},
		{"long then short", append(long, 1, 5), len(long), true},
		{"short", []byte{3, 9, 9}, 0, false},
		{"bad count", []byte{0x80, 1}, 0, false},
		{"cut count", []byte{0xfe, 0x01}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, ok := lastMessage(tc.data)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.start, start)
			}
		})
	}
}

// channelPair returns both ends of a descriptor channel.
func channelPair(t *testing.T) (a, b *fdChannel) {
	t.Helper()
	fa, fb, err := socketPair()
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	a, err = newFDChannel(fa, log, nil)
	require.NoError(t, err)
	b, err = newFDChannel(fb, log, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	})
	return a, b
}

func tempFile(t *testing.T, content string) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "fd")
	require.NoError(t, err)
	_, err = f.WriteString(content)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	_, err := f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}

func TestFDChannelBothWays(t *testing.T) {
	a, b := channelPair(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	// Claimed after it arrived, and before: both work.
	t1, err := a.send(ctx, tempFile(t, "one"))
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	got, err := b.take(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, "one", readAll(t, got))
	require.NoError(t, got.Close())

	ch := make(chan *os.File, 1)
	go func() {
		f, err := a.take(ctx, 1) // b's first token
		if err != nil {
			t.Error(err)
		}
		ch <- f
	}()
	time.Sleep(10 * time.Millisecond)
	t2, err := b.send(ctx, tempFile(t, "two"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), t2)
	got = <-ch
	require.NotNil(t, got)
	require.Equal(t, "two", readAll(t, got))
	require.NoError(t, got.Close())

	// Many in flight, claimed out of order.
	var tokens []uint64
	for i := range 20 {
		tok, err := a.send(ctx, tempFile(t, string(rune('a'+i))))
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	for i := len(tokens) - 1; i >= 0; i-- {
		f, err := b.take(ctx, tokens[i])
		require.NoError(t, err)
		require.Equal(t, string(rune('a'+i)), readAll(t, f))
		require.NoError(t, f.Close())
	}
}

func TestFDChannelTimeoutAndPeerGone(t *testing.T) {
	fa, fb, err := socketPair()
	require.NoError(t, err)
	gone := make(chan error, 1)
	log := slog.New(slog.DiscardHandler)
	a, err := newFDChannel(fa, log, func(err error) { gone <- err })
	require.NoError(t, err)
	b, err := newFDChannel(fb, log, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = a.take(ctx, 99)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A waiter learns at once that the other side is gone.
	errc := make(chan error, 1)
	go func() {
		_, err := a.take(context.Background(), 100)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, b.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, backend.ErrUnavailable)
	case <-time.After(5 * time.Second):
		t.Fatal("take did not return when the other side closed")
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("onDone was not called")
	}
	<-a.Done()
	_, err = a.send(context.Background(), tempFile(t, "x"))
	require.ErrorIs(t, err, backend.ErrUnavailable)
	require.NoError(t, a.Close())
}

func TestFDChannelRejectsOtherDescriptors(t *testing.T) {
	f := tempFile(t, "not a socket")
	dup, err := os.Open(f.Name())
	require.NoError(t, err)
	_, err = newFDChannel(dup, slog.New(slog.DiscardHandler), nil)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestHelloRefusesOtherVersions(t *testing.T) {
	s := newServer(nil, nil, slog.New(slog.DiscardHandler))
	_, err := s.hello(t.Context(), &helloReq{Version: ProtocolVersion + 1})
	require.ErrorIs(t, err, backend.ErrNotSupported)
	require.Contains(t, err.Error(), "rebuild")
}
