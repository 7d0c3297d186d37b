//go:build linux

package plugin

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/intranode/intranode/backend"
)

// objKind says what a server object is.
type objKind uint8

const (
	kindDevice objKind = iota + 1
	kindAlloc
	kindStream
	kindEvent
	kindGraph
	kindModule
	kindFunction
)

// String names the kind in messages.
func (k objKind) String() string {
	switch k {
	case kindDevice:
		return "device"
	case kindAlloc:
		return "allocation"
	case kindStream:
		return "stream"
	case kindEvent:
		return "event"
	case kindGraph:
		return "graph"
	case kindModule:
		return "module"
	case kindFunction:
		return "function"
	}
	return "object"
}

// entry is one object the host holds an id for.
type entry struct {
	kind objKind
	// dev is the id of the device handle the object was made through (0
	// for devices themselves); closing that handle drops the object.
	dev uint64
	// parent is the module of a function.
	parent uint64
	v      any
}

// server is the plugin side: it runs the served backend's calls and keeps
// the objects the host names by id. Device memory, streams and kernels
// never leave this process.
type server struct {
	b   backend.Backend
	fds *fdChannel
	log *slog.Logger

	mu     sync.Mutex
	next   uint64
	objs   map[uint64]entry
	closed bool

	// hostMemMu serialises the per-device probe of whether shareable
	// memory is host memory (see allocHost); hostMem caches the answers.
	hostMemMu sync.Mutex
	hostMem   map[int]error

	// fastHandlers serve the fast lane (fastlane.go).
	fastHandlers []grpc.MethodDesc
}

func newServer(b backend.Backend, fds *fdChannel, log *slog.Logger) *server {
	return &server{b: b, fds: fds, log: log, objs: map[uint64]entry{}, hostMem: map[int]error{}, fastHandlers: fastHandlers()}
}

// add registers an object and returns its id.
func (s *server) add(e entry) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, backend.Errorf(backend.CodeClosed, "plugin: server is shutting down")
	}
	s.next++
	s.objs[s.next] = e
	return s.next, nil
}

// lookup returns object id, which must be of kind k and type T.
func lookup[T any](s *server, id uint64, k objKind) (T, entry, error) {
	var zero T
	s.mu.Lock()
	e, ok := s.objs[id]
	s.mu.Unlock()
	if !ok {
		return zero, entry{}, backend.Errorf(backend.CodeClosed, "plugin: %s %d is closed (or was never opened)", k, id)
	}
	if e.kind != k {
		return zero, entry{}, backend.Errorf(backend.CodeInvalidArgument, "plugin: object %d is a %s, not a %s", id, e.kind, k)
	}
	v, ok := e.v.(T)
	if !ok {
		return zero, entry{}, backend.Errorf(backend.CodeInternal, "plugin: %s %d holds a %T", k, id, e.v)
	}
	return v, e, nil
}

// lookupPair looks up the two objects a request names: a of kind ka and b
// of kind kb.
func lookupPair[A, B any](s *server, a uint64, ka objKind, b uint64, kb objKind) (A, B, error) {
	va, _, err := lookup[A](s, a, ka)
	if err != nil {
		var zero B
		return va, zero, err
	}
	vb, _, err := lookup[B](s, b, kb)
	return va, vb, err
}

// remove drops object id of kind k from the table and returns it.
func (s *server) remove(id uint64, k objKind) (entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.objs[id]
	if !ok || e.kind != k {
		// Closing twice is a no-op, as in the backend contract.
		return entry{}, errNotHeld
	}
	delete(s.objs, id)
	return e, nil
}

// errNotHeld marks a close of an object the server no longer holds.
var errNotHeld = errors.New("not held")

func closeObject(v any) error {
	if c, ok := v.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// closeRef closes object id of kind k; closing an unknown id is a no-op.
func (s *server) closeRef(id uint64, k objKind) error {
	e, err := s.remove(id, k)
	if errors.Is(err, errNotHeld) {
		return nil
	}
	return closeObject(e.v)
}

// closeDevice closes device handle id. Its events and graphs are closed
// first (the device does not track them); its allocations, streams and
// modules are left for the device's own Close, which releases and reports
// them.
func (s *server) closeDevice(id uint64) error {
	e, err := s.remove(id, kindDevice)
	if errors.Is(err, errNotHeld) {
		return nil
	}
	var owned []entry
	s.mu.Lock()
	for oid, o := range s.objs {
		if o.dev == id {
			owned = append(owned, o)
			delete(s.objs, oid)
		}
	}
	s.mu.Unlock()
	for _, o := range owned {
		if o.kind == kindEvent || o.kind == kindGraph {
			_ = closeObject(o.v)
		}
	}
	return closeObject(e.v)
}

// shutdown closes every device the host left open. The server refuses new
// objects afterwards.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closed = true
	var devs []uint64
	for id, e := range s.objs {
		if e.kind == kindDevice {
			devs = append(devs, id)
		}
	}
	s.mu.Unlock()
	for _, id := range devs {
		if err := s.closeDevice(id); err != nil {
			s.log.Debug("plugin: closing a device the host left open", "id", id, "err", err)
		}
	}
}

// The handlers the table in service.go does not build from its helpers.
// Each runs the call on the served backend; errors go back through
// toStatus with their codes.

func (s *server) hello(ctx context.Context, req *helloReq) (*helloReply, error) {
	if req.Version != ProtocolVersion {
		return nil, backend.Errorf(backend.CodeNotSupported, "plugin: host speaks protocol %d, this plugin %d: rebuild the older side", req.Version, ProtocolVersion)
	}
	s.log.Debug("plugin: host connected", "host_pid", req.HostPID, "backend", s.b.Name())
	fast := 0
	for _, token := range req.Fast {
		f, err := s.fds.take(ctx, token)
		if err == nil {
			err = s.serveFast(f)
		}
		if err != nil {
			s.log.Debug("plugin: fast lanes", "served", fast, "err", err)
			break
		}
		fast++
	}
	return &helloReply{Version: ProtocolVersion, Name: s.b.Name(), Caps: s.b.Capabilities(), PID: os.Getpid(), Fast: fast}, nil
}

func (s *server) openDevice(ctx context.Context, req *index) (*deviceReply, error) {
	d, err := s.b.Open(ctx, req.I)
	if err != nil {
		return nil, err
	}
	id, err := s.add(entry{kind: kindDevice, v: d})
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return &deviceReply{ID: id, Info: d.Info(), Granularity: d.Granularity()}, nil
}

// addAlloc registers an allocation made through device dev, releasing it if
// the server is shutting down.
func (s *server) addAlloc(dev uint64, a backend.Allocation) (uint64, error) {
	id, err := s.add(entry{kind: kindAlloc, dev: dev, v: a})
	if err != nil {
		_ = a.Close()
	}
	return id, err
}

// allocReply registers a, made through device dev, and describes it.
func (s *server) allocReply(dev uint64, a backend.Allocation) (*allocReply, error) {
	id, err := s.addAlloc(dev, a)
	if err != nil {
		return nil, err
	}
	return &allocReply{ID: id, Ptr: a.Ptr(), Size: a.Size()}, nil
}

func (s *server) importHandle(ctx context.Context, req *importReq) (*allocReply, error) {
	h := backend.Handle{Kind: req.Kind, Opaque: req.Opaque, Size: req.Size}
	if req.Kind == backend.HandleFD {
		// Claim the descriptor first, whatever happens next, so that it
		// does not wait unclaimed.
		f, err := s.fds.take(ctx, req.Token)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		h.File = f
	}
	d, _, err := lookup[backend.Device](s, req.Dev, kindDevice)
	if err != nil {
		return nil, err
	}
	a, err := d.Import(ctx, h)
	if err != nil {
		return nil, err
	}
	return s.allocReply(req.Dev, a)
}

func (s *server) export(ctx context.Context, req *exportReq) (*exportReply, error) {
	a, _, err := lookup[backend.Allocation](s, req.ID, kindAlloc)
	if err != nil {
		return nil, err
	}
	h, err := a.Export(req.Kind)
	if err != nil {
		return nil, err
	}
	reply := &exportReply{Kind: h.Kind, Opaque: h.Opaque, Size: h.Size}
	if h.File != nil {
		defer h.File.Close()
		if reply.Token, err = s.fds.send(ctx, h.File); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

// copyFromDevice bounds a copy to one message's payload.
func copyFromDevice(ctx context.Context, d backend.Device, req *copyFromReq) (*copyFromReply, error) {
	if req.N < 0 || req.N > copyChunk {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: copy of %d bytes in one message (at most %d)", req.N, copyChunk)
	}
	buf := make([]byte, req.N)
	if err := d.CopyFromDevice(ctx, buf, req.Src); err != nil {
		return nil, err
	}
	return &copyFromReply{Data: buf}, nil
}

func (s *server) function(_ context.Context, req *functionReq) (*ref, error) {
	m, e, err := lookup[backend.Module](s, req.Module, kindModule)
	if err != nil {
		return nil, err
	}
	f, err := m.Function(req.Name)
	if err != nil {
		return nil, err
	}
	id, err := s.add(entry{kind: kindFunction, dev: e.dev, parent: req.Module, v: f})
	if err != nil {
		return nil, err
	}
	return &ref{ID: id}, nil
}

func (s *server) closeModule(_ context.Context, req *ref) (*empty, error) {
	e, err := s.remove(req.ID, kindModule)
	if errors.Is(err, errNotHeld) {
		return &empty{}, nil
	}
	s.mu.Lock()
	for id, o := range s.objs {
		if o.kind == kindFunction && o.parent == req.ID {
			delete(s.objs, id)
		}
	}
	s.mu.Unlock()
	return &empty{}, closeObject(e.v)
}

func (s *server) launch(_ context.Context, req *launchReq) (*empty, error) {
	st, fn, err := lookupPair[backend.Stream, backend.Function](s, req.Stream, kindStream, req.Func, kindFunction)
	if err != nil {
		return nil, err
	}
	args := make([]backend.Arg, len(req.Args))
	for i, a := range req.Args {
		switch a.Size {
		case 4:
			args[i] = backend.U32(uint32(a.Bits))
		case 8:
			args[i] = backend.U64(a.Bits)
		default:
			return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: kernel argument %d has size %d (want 4 or 8)", i, a.Size)
		}
	}
	cfg := backend.LaunchConfig{Grid: req.Grid, Block: req.Block, SharedMem: req.SharedMem, Early: req.Early}
	return &empty{}, st.Launch(fn, cfg, args...)
}

func (s *server) streamAndEvent(req *streamEventReq) (backend.Stream, backend.Event, error) {
	return lookupPair[backend.Stream, backend.Event](s, req.Stream, kindStream, req.Event, kindEvent)
}

func (s *server) endCapture(_ context.Context, req *ref) (*ref, error) {
	st, e, err := lookup[backend.Stream](s, req.ID, kindStream)
	if err != nil {
		return nil, err
	}
	g, err := st.EndCapture()
	if err != nil {
		return nil, err
	}
	id, err := s.add(entry{kind: kindGraph, dev: e.dev, v: g})
	if err != nil {
		_ = g.Close()
		return nil, err
	}
	return &ref{ID: id}, nil
}

func (s *server) elapsed(_ context.Context, req *elapsedReq) (*elapsedReply, error) {
	ev, start, err := lookupPair[backend.Event, backend.Event](s, req.Event, kindEvent, req.Start, kindEvent)
	if err != nil {
		return nil, err
	}
	d, err := ev.Elapsed(start)
	return &elapsedReply{Nanos: int64(d / time.Nanosecond)}, err
}

func (s *server) launchGraph(_ context.Context, req *graphLaunchReq) (*empty, error) {
	g, st, err := lookupPair[backend.Graph, backend.Stream](s, req.Graph, kindGraph, req.Stream, kindStream)
	if err != nil {
		return nil, err
	}
	return &empty{}, g.Launch(st)
}
