//go:build linux

package plugin

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/intranode/intranode/backend"
)

// Plugin is the go-plugin glue of the protocol (a goplugin.GRPCPlugin):
// GRPCServer serves a backend, GRPCClient returns the host-side *Backend.
// Plugins call Serve and hosts Open, which build it; it is exported for
// go-plugin's in-process test connection (see NewLoopback).
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin

	srv  *server   // the serving end, nil on a host
	host *hostSide // the host end, nil in a plugin
}

var _ goplugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the backend service on s.
func (p *Plugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.srv == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "plugin: this Plugin has no backend to serve (use Serve or NewLoopback)")
	}
	s.RegisterService(&serviceDesc, p.srv)
	return nil
}

// GRPCClient returns the *Backend served over cc. ctx ends when the plugin
// process exits.
func (p *Plugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	if p.host == nil {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "plugin: this Plugin has no host side (use Open or NewLoopback)")
	}
	return newBackend(ctx.Done(), p.host, cc)
}

// NewLoopback returns a Plugin whose serving end serves b in this process
// and whose host end dispenses a *Backend, the two joined by a descriptor
// socketpair. Give it to go-plugin's TestPluginGRPCConn to run a backend
// through the whole protocol — gRPC, codec, error mapping and descriptor
// passing — without a subprocess (package plugintest does). name is what the
// host-side Backend's Name returns after "plugin:". When the host side's
// Backend is closed, the serving end closes the devices it left open; b
// stays the caller's.
func NewLoopback(b backend.Backend, name string, opts ...Option) (*Plugin, error) {
	o := buildOptions(opts)
	srvEnd, hostEnd, err := socketPair()
	if err != nil {
		return nil, err
	}
	srv := newServer(b, nil, o.log)
	if srv.fds, err = newFDChannel(srvEnd, o.log, func(error) { srv.shutdown() }); err != nil {
		_ = hostEnd.Close()
		return nil, err
	}
	hostFDs, err := newFDChannel(hostEnd, o.log, nil)
	if err != nil {
		_ = srv.fds.Close()
		return nil, err
	}
	return &Plugin{srv: srv, host: &hostSide{fds: hostFDs, opts: o, name: Name + ":" + name}}, nil
}
