//go:build linux

package plugin

import (
	"context"
	"io"

	"google.golang.org/grpc"

	"github.com/intranode/intranode/backend"
)

// serviceDesc is the protocol's gRPC service, written by hand: every method
// is unary, its messages are this package's structs and gobCodec encodes
// them, so no .proto file or generated code is involved. Adding a HAL
// method to the plugin is the client method (objects.go, client.go) plus
// one entry here: most entries are a call on the object the request
// names (on), on the backend (onBackend), a call that makes an object the
// server keeps (keep), or a close (closer). A short stream call that never
// waits for the device also goes in fastMethods (fastlane.go).
var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		unary(mHello, (*server).hello),
		unary(mProbe, onBackend(func(ctx context.Context, b backend.Backend, _ *empty) (*empty, error) {
			return &empty{}, b.Probe(ctx)
		})),
		unary(mDeviceCount, onBackend(func(ctx context.Context, b backend.Backend, _ *empty) (*countReply, error) {
			n, err := b.DeviceCount(ctx)
			return &countReply{N: n}, err
		})),
		unary(mDeviceInfo, onBackend(func(ctx context.Context, b backend.Backend, r *index) (*infoReply, error) {
			info, err := b.DeviceInfo(ctx, r.I)
			return &infoReply{Info: info}, err
		})),
		unary(mLinkMatrix, onBackend(func(ctx context.Context, b backend.Backend, _ *empty) (*matrixReply, error) {
			m, err := b.LinkMatrix(ctx)
			return &matrixReply{Matrix: m}, err
		})),
		unary(mPeerAccess, onBackend(func(ctx context.Context, b backend.Backend, r *pair) (*answer, error) {
			ok, err := b.PeerAccess(ctx, r.I, r.J)
			return &answer{OK: ok}, err
		})),
		unary(mFabricSupported, onBackend(func(ctx context.Context, b backend.Backend, r *index) (*answer, error) {
			ok, err := b.FabricSupported(ctx, r.I)
			return &answer{OK: ok}, err
		})),
		unary(mMulticastSupported, onBackend(func(ctx context.Context, b backend.Backend, r *index) (*answer, error) {
			ok, err := b.MulticastSupported(ctx, r.I)
			return &answer{OK: ok}, err
		})),
		unary(mDiagnostics, onBackend(func(ctx context.Context, b backend.Backend, _ *empty) (*diagnosticsReply, error) {
			if d, ok := b.(backend.Diagnoser); ok {
				return &diagnosticsReply{Checks: d.Diagnostics(ctx)}, nil
			}
			return &diagnosticsReply{}, nil
		})),
		unary(mOpenDevice, (*server).openDevice),
		unary(mCloseDevice, func(s *server, _ context.Context, r *ref) (*empty, error) { return &empty{}, s.closeDevice(r.ID) }),

		unary(mAlloc, keepAlloc(func(ctx context.Context, d backend.Device, r *allocReq) (backend.Allocation, error) {
			return d.Alloc(ctx, r.Size)
		})),
		unary(mAllocShareable, keepAlloc(func(ctx context.Context, d backend.Device, r *allocReq) (backend.Allocation, error) {
			return d.AllocShareable(ctx, r.Size, r.Kind)
		})),
		unary(mAllocHost, (*server).allocHost),
		unary(mImport, (*server).importHandle),
		unary(mExport, (*server).export),
		unary(mFree, closer(kindAlloc)),
		unary(mCopyToDevice, on(kindDevice, func(ctx context.Context, d backend.Device, r *copyToReq) (*empty, error) {
			return &empty{}, d.CopyToDevice(ctx, r.Dst, r.Data)
		})),
		unary(mCopyFromDevice, on(kindDevice, copyFromDevice)),
		unary(mMemset, on(kindDevice, func(ctx context.Context, d backend.Device, r *memsetReq) (*empty, error) {
			return &empty{}, d.Memset(ctx, r.Dst, r.V, r.N)
		})),

		unary(mNewStream, keep(kindStream, func(ctx context.Context, d backend.Device, _ *ref) (io.Closer, error) {
			return d.NewStream(ctx)
		})),
		unary(mNewEvent, keep(kindEvent, func(ctx context.Context, d backend.Device, r *eventReq) (io.Closer, error) {
			return d.NewEvent(ctx, r.Timing)
		})),
		unary(mLoadModule, keep(kindModule, func(ctx context.Context, d backend.Device, r *moduleReq) (io.Closer, error) {
			return d.LoadModule(ctx, backend.ModuleSource{Name: r.Name, Image: r.Image})
		})),
		unary(mFunction, (*server).function),
		unary(mCloseModule, (*server).closeModule),

		unary(mLaunch, (*server).launch),
		unary(mCopyAsync, on(kindStream, func(_ context.Context, st backend.Stream, r *copyAsyncReq) (*empty, error) {
			return &empty{}, st.CopyAsync(r.Dst, r.Src, r.N)
		})),
		unary(mRecord, withEvent(backend.Stream.Record)),
		unary(mWaitEvent, withEvent(backend.Stream.WaitEvent)),
		unary(mSynchronize, on(kindStream, func(ctx context.Context, st backend.Stream, _ *ref) (*empty, error) {
			return &empty{}, st.Synchronize(ctx)
		})),
		unary(mBeginCapture, on(kindStream, func(_ context.Context, st backend.Stream, _ *ref) (*empty, error) {
			return &empty{}, st.BeginCapture()
		})),
		unary(mEndCapture, (*server).endCapture),
		unary(mCloseStream, closer(kindStream)),

		unary(mEventSynchronize, on(kindEvent, func(ctx context.Context, ev backend.Event, _ *ref) (*empty, error) {
			return &empty{}, ev.Synchronize(ctx)
		})),
		unary(mEventDone, on(kindEvent, func(_ context.Context, ev backend.Event, _ *ref) (*answer, error) {
			done, err := ev.Done()
			return &answer{OK: done}, err
		})),
		unary(mElapsed, (*server).elapsed),
		unary(mCloseEvent, closer(kindEvent)),
		unary(mLaunchGraph, (*server).launchGraph),
		unary(mCloseGraph, closer(kindGraph)),
	},
}

// targeted is a request that names the server object it works on.
type targeted interface{ target() uint64 }

func (r *ref) target() uint64          { return r.ID }
func (r *copyToReq) target() uint64    { return r.Dev }
func (r *copyFromReq) target() uint64  { return r.Dev }
func (r *memsetReq) target() uint64    { return r.Dev }
func (r *eventReq) target() uint64     { return r.Dev }
func (r *moduleReq) target() uint64    { return r.Dev }
func (r *copyAsyncReq) target() uint64 { return r.Stream }

// handler is what unary serves.
type handler[Req, Resp any] func(*server, context.Context, *Req) (*Resp, error)

// onBackend serves a call on the served backend itself.
func onBackend[Req, Resp any](f func(context.Context, backend.Backend, *Req) (*Resp, error)) handler[Req, Resp] {
	return func(s *server, ctx context.Context, r *Req) (*Resp, error) { return f(ctx, s.b, r) }
}

// on serves a call on the object of kind k that the request names.
func on[T any, Req any, Resp any, PR interface {
	*Req
	targeted
}](k objKind, f func(context.Context, T, PR) (*Resp, error)) handler[Req, Resp] {
	return func(s *server, ctx context.Context, r *Req) (*Resp, error) {
		obj, _, err := lookup[T](s, PR(r).target(), k)
		if err != nil {
			return nil, err
		}
		return f(ctx, obj, r)
	}
}

// keep serves a call on the device the request names that makes an object
// of kind k; the server keeps it and replies with its id.
func keep[Req any, PR interface {
	*Req
	targeted
}](k objKind, f func(context.Context, backend.Device, PR) (io.Closer, error)) handler[Req, ref] {
	return func(s *server, ctx context.Context, r *Req) (*ref, error) {
		dev := PR(r).target()
		d, _, err := lookup[backend.Device](s, dev, kindDevice)
		if err != nil {
			return nil, err
		}
		obj, err := f(ctx, d, r)
		if err != nil {
			return nil, err
		}
		id, err := s.add(entry{kind: k, dev: dev, v: obj})
		if err != nil {
			_ = obj.Close()
			return nil, err
		}
		return &ref{ID: id}, nil
	}
}

// keepAlloc is keep for allocations, whose reply describes them.
func keepAlloc(f func(context.Context, backend.Device, *allocReq) (backend.Allocation, error)) handler[allocReq, allocReply] {
	return func(s *server, ctx context.Context, r *allocReq) (*allocReply, error) {
		d, _, err := lookup[backend.Device](s, r.Dev, kindDevice)
		if err != nil {
			return nil, err
		}
		a, err := f(ctx, d, r)
		if err != nil {
			return nil, err
		}
		return s.allocReply(r.Dev, a)
	}
}

// closer serves the close of an object of kind k; closing an id the server
// no longer holds is a no-op.
func closer(k objKind) handler[ref, empty] {
	return func(s *server, _ context.Context, r *ref) (*empty, error) { return &empty{}, s.closeRef(r.ID, k) }
}

// withEvent serves a stream call that takes an event (Record, WaitEvent).
func withEvent(f func(backend.Stream, backend.Event) error) handler[streamEventReq, empty] {
	return func(s *server, _ context.Context, r *streamEventReq) (*empty, error) {
		st, ev, err := s.streamAndEvent(r)
		if err != nil {
			return nil, err
		}
		return &empty{}, f(st, ev)
	}
}

// unary adapts a typed handler to gRPC: it decodes the request, runs the
// handler (through the server's interceptor, if any) and turns a backend
// error into a status carrying its code.
func unary[Req, Resp any](name string, h handler[Req, Resp]) grpc.MethodDesc {
	full := "/" + serviceName + "/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := new(Req)
			if err := dec(req); err != nil {
				return nil, err
			}
			call := func(ctx context.Context, r any) (any, error) {
				resp, err := h(srv.(*server), ctx, r.(*Req))
				if err != nil {
					return nil, toStatus(err)
				}
				return resp, nil
			}
			if ic == nil {
				return call(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, call)
		},
	}
}
