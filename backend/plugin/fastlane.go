//go:build linux

package plugin

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/intranode/intranode/backend"
)

// The fast lane carries the short stream calls (launches, asynchronous
// copies, records, event waits and queries, graph launches) over a
// socketpair of their own, which the host sends the plugin over the
// descriptor channel at Hello: one packet a request, one its reply, written
// and read by the calling goroutine on the host and by one goroutine in the
// plugin. A unary gRPC call costs a round trip through several goroutines
// on each side, several times a lane's (BenchmarkCall; docs/PERFORMANCE.md),
// and these calls are most of a collective's.
//
// A lane serves one call at a time: only calls that do not wait for the
// device use one (a Synchronize waiting there for a kernel that needs another
// rank's launch would hold that launch up), and a call that finds every lane
// busy goes over gRPC rather than wait (a launch may still block in the
// driver while its queue is full). A host has fastLanes of them, for ranks
// that are goroutines of one process sharing the plugin. The order of a goroutine's calls holds
// across the two paths, since every call returns only once the plugin has
// run it. A plugin of an earlier build ignores the lane (Hello's reply says
// so) and the host keeps to gRPC; a lane that fails (a timeout, a broken
// socket) is dropped and its calls go back to gRPC, which reports whatever
// is wrong with the plugin.

// fastMethods are the calls the lane carries; a request's first byte is
// the method's index here.
var fastMethods = []string{mLaunch, mCopyAsync, mRecord, mWaitEvent, mEventDone, mLaunchGraph}

// fastLanes is how many lanes a host opens.
const fastLanes = 4

// fastPacket bounds a lane packet: a request that encodes larger (a launch
// of very many arguments) goes over gRPC.
const fastPacket = 16 << 10

// Reply packets start with one of these.
const (
	fastOK  = 0
	fastErr = 1 // followed by the backend code (4 bytes, little-endian) and the message
)

// fastLane is the host's end.
type fastLane struct {
	codec encoding.Codec

	mu     sync.Mutex
	c      *net.UnixConn
	buf    []byte
	broken bool
	calls  uint64 // calls the lane carried, for tests
}

// newFastLane makes the socketpair and returns the host's end and the
// plugin's, to be sent over the descriptor channel.
func newFastLane() (*fastLane, *os.File, error) {
	host, peer, err := socketPair()
	if err != nil {
		return nil, nil, err
	}
	c, err := net.FileConn(host)
	_ = host.Close()
	if err != nil {
		_ = peer.Close()
		return nil, nil, err
	}
	return &fastLane{codec: encoding.GetCodec(codecName), c: c.(*net.UnixConn), buf: make([]byte, fastPacket)}, peer, nil
}

// lanes are a host's fast lanes.
type lanes []*fastLane

// offerLanes makes up to fastLanes lanes and sends their plugin ends on
// fds; it returns the host's ends and the tokens that name the plugin's
// for Hello. A lane it cannot make or send ends the offer there.
func offerLanes(ctx context.Context, fds *fdChannel, log *slog.Logger) (lanes, []uint64) {
	var ls lanes
	var tokens []uint64
	for range fastLanes {
		lane, peer, err := newFastLane()
		if err != nil {
			log.Debug("plugin: fast lanes", "made", len(ls), "err", err)
			break
		}
		token, err := fds.send(ctx, peer)
		_ = peer.Close()
		if err != nil {
			_ = lane.Close()
			log.Debug("plugin: fast lanes", "made", len(ls), "err", err)
			break
		}
		ls, tokens = append(ls, lane), append(tokens, token)
	}
	return ls, tokens
}

// keep returns the first n lanes, those the plugin serves, and closes the
// rest.
func (ls lanes) keep(n int) lanes {
	n = min(max(n, 0), len(ls))
	_ = ls[n:].Close()
	return ls[:n]
}

// call runs method over a free lane; ok is false when no lane can carry
// the call (not a lane method, a context without a deadline, which only
// gRPC can watch for its end, a request too large, every lane busy or
// dropped), and the caller then uses gRPC.
func (ls lanes) call(ctx context.Context, method string, req, resp any) (ok bool, err error) {
	i := slices.Index(fastMethods, method)
	dl, bounded := ctx.Deadline()
	if len(ls) == 0 || i < 0 || !bounded {
		return false, nil
	}
	body, err := ls[0].codec.Marshal(req)
	if err != nil || len(body)+1 > fastPacket {
		return false, nil
	}
	for _, l := range ls {
		if ok, err := l.try(ctx, dl, byte(i), body, resp); ok {
			return true, err
		}
	}
	return false, nil
}

// Close closes every lane.
func (ls lanes) Close() error {
	for _, l := range ls {
		_ = l.Close()
	}
	return nil
}

// try runs the call on l unless l is busy or dropped.
func (l *fastLane) try(ctx context.Context, dl time.Time, method byte, body []byte, resp any) (ok bool, err error) {
	// A call never waits for a lane: one that can block in the plugin (a
	// launch while the driver's queue is full) must not hold up another
	// goroutine's launch, which its kernel may be waiting for.
	if !l.mu.TryLock() {
		return false, nil
	}
	defer l.mu.Unlock()
	if l.broken {
		return false, nil
	}
	n, err := l.roundTrip(dl, method, body)
	if err != nil {
		// A reply may still come: the lane's packets no longer pair up.
		l.broken = true
		_ = l.c.Close()
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		return false, nil
	}
	l.calls++
	if l.buf[0] == fastErr && n >= 5 {
		// As a status, like gRPC's, for the caller's one error path.
		code := backend.Code(binary.LittleEndian.Uint32(l.buf[1:5]))
		return true, toStatus(&backend.Error{Code: code, Msg: string(l.buf[5:n])})
	}
	return true, l.codec.Unmarshal(l.buf[1:n], resp)
}

func (l *fastLane) roundTrip(dl time.Time, method byte, body []byte) (int, error) {
	if err := l.c.SetDeadline(dl); err != nil {
		return 0, err
	}
	l.buf[0] = method
	copy(l.buf[1:], body)
	if _, err := l.c.Write(l.buf[:1+len(body)]); err != nil {
		return 0, err
	}
	n, err := l.c.Read(l.buf)
	if err == nil && n == 0 {
		err = errors.New("plugin: fast lane: empty reply")
	}
	return n, err
}

// Close closes the host's end; the plugin's goroutine then ends.
func (l *fastLane) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.broken = true
	return l.c.Close()
}

// fastHandlers returns the service's handlers of fastMethods, in order.
func fastHandlers() []grpc.MethodDesc {
	handlers := make([]grpc.MethodDesc, len(fastMethods))
	for i, m := range fastMethods {
		handlers[i] = serviceDesc.Methods[slices.IndexFunc(serviceDesc.Methods, func(d grpc.MethodDesc) bool { return d.MethodName == m })]
	}
	return handlers
}

// serveFast serves the lane on f, the plugin's end, until the host closes
// its end (Backend.Close, or the host's exit).
func (s *server) serveFast(f *os.File) error {
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		return err
	}
	handlers := s.fastHandlers
	codec := encoding.GetCodec(codecName)
	go func() {
		defer c.Close()
		in, out := make([]byte, fastPacket), make([]byte, 1, fastPacket)
		for {
			n, err := c.Read(in)
			if err != nil || n == 0 || int(in[0]) >= len(handlers) {
				s.log.Debug("plugin: fast lane ends", "err", err)
				return
			}
			body := in[1:n]
			dec := func(v any) error { return codec.Unmarshal(body, v) }
			out = out[:1]
			resp, err := handlers[in[0]].Handler(s, context.Background(), dec, nil)
			var b []byte
			if err == nil {
				b, err = codec.Marshal(resp)
			}
			if err != nil {
				be, ok := fromStatus(err)
				if !ok {
					be = &backend.Error{Code: backend.CodeOf(err), Msg: err.Error()}
				}
				out[0] = fastErr
				b = binary.LittleEndian.AppendUint32(nil, uint32(backend.CodeOf(be)))
				b = append(b, be.Error()...)
				b = b[:min(len(b), fastPacket-1)] // the host reads one packet this size
			} else {
				out[0] = fastOK
			}
			if _, err := c.Write(append(out, b...)); err != nil {
				s.log.Debug("plugin: fast lane ends", "err", err)
				return
			}
		}
	}()
	return nil
}
