//go:build linux

package plugin

import (
	"context"

	"google.golang.org/grpc"
)

// serviceDesc is the protocol's gRPC service, written by hand: every method
// is unary, its messages are this package's structs and gobCodec encodes
// them, so no .proto file or generated code is involved.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		unary(mHello, (*server).hello),
		unary(mProbe, (*server).probe),
		unary(mDeviceCount, (*server).deviceCount),
		unary(mDeviceInfo, (*server).deviceInfo),
		unary(mLinkMatrix, (*server).linkMatrix),
		unary(mPeerAccess, (*server).peerAccess),
		unary(mFabricSupported, (*server).fabricSupported),
		unary(mMulticastSupported, (*server).multicastSupported),
		unary(mDiagnostics, (*server).diagnostics),
		unary(mOpenDevice, (*server).openDevice),
		unary(mCloseDevice, (*server).closeDeviceRPC),
		unary(mAlloc, (*server).alloc),
		unary(mAllocShareable, (*server).allocShareable),
		unary(mAllocHost, (*server).allocHost),
		unary(mImport, (*server).importHandle),
		unary(mExport, (*server).export),
		unary(mFree, (*server).free),
		unary(mCopyToDevice, (*server).copyToDevice),
		unary(mCopyFromDevice, (*server).copyFromDevice),
		unary(mMemset, (*server).memset),
		unary(mNewStream, (*server).newStream),
		unary(mNewEvent, (*server).newEvent),
		unary(mLoadModule, (*server).loadModule),
		unary(mFunction, (*server).function),
		unary(mCloseModule, (*server).closeModule),
		unary(mLaunch, (*server).launch),
		unary(mCopyAsync, (*server).copyAsync),
		unary(mRecord, (*server).record),
		unary(mWaitEvent, (*server).waitEvent),
		unary(mSynchronize, (*server).synchronize),
		unary(mBeginCapture, (*server).beginCapture),
		unary(mEndCapture, (*server).endCapture),
		unary(mCloseStream, (*server).closeStream),
		unary(mEventSynchronize, (*server).eventSynchronize),
		unary(mEventDone, (*server).eventDone),
		unary(mElapsed, (*server).elapsed),
		unary(mCloseEvent, (*server).closeEvent),
		unary(mLaunchGraph, (*server).launchGraph),
		unary(mCloseGraph, (*server).closeGraph),
	},
}

// unary adapts a typed handler to gRPC: it decodes the request, runs the
// handler (through the server's interceptor, if any) and turns a backend
// error into a status carrying its code.
func unary[Req, Resp any](name string, h func(*server, context.Context, *Req) (*Resp, error)) grpc.MethodDesc {
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

// invoke calls method on the plugin with the protocol's codec.
func invoke[Req, Resp any](ctx context.Context, cc grpc.ClientConnInterface, method string, req *Req) (*Resp, error) {
	resp := new(Resp)
	err := cc.Invoke(ctx, "/"+serviceName+"/"+method, req, resp, grpc.CallContentSubtype(codecName))
	return resp, err
}
