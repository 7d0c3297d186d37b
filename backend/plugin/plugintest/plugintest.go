//go:build linux

// Package plugintest runs a backend through the plugin protocol inside a
// test process, the way nomad's driver tests wrap a driver in go-plugin's
// test connection: every call crosses gRPC, the codec, the error mapping
// and the descriptor socket, yet no binary has to be built. A vendor's
// backend that passes the conformance suite through Connect behaves the same
// served from its own plugin binary.
//
// Importing the package silences hclog's default output: go-plugin's test
// connection logs at debug level to it and offers no way to pass a logger.
package plugintest

import (
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/plugin"
)

func init() {
	// Written once, before any test runs, so no logger reads it meanwhile.
	hclog.DefaultOutput = io.Discard
}

// Connect serves b over go-plugin's in-process gRPC connection and returns
// the host side. Everything is torn down when the test ends: the host side
// is closed (the serving side then closes the devices left open) and the
// gRPC server stopped. b stays the caller's.
func Connect(t testing.TB, b backend.Backend, opts ...plugin.Option) *plugin.Backend {
	t.Helper()
	p, err := plugin.NewLoopback(b, "loopback", opts...)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{plugin.PluginName: p})
	raw, err := client.Dispense(plugin.PluginName)
	if err != nil {
		_ = client.Close()
		t.Fatalf("plugintest: dispensing the backend: %v", err)
	}
	hb, ok := raw.(*plugin.Backend)
	if !ok {
		t.Fatalf("plugintest: dispensed a %T", raw)
	}
	t.Cleanup(func() {
		if err := hb.Close(); err != nil {
			t.Errorf("plugintest: closing the host side: %v", err)
		}
		// Closing the client asks the server to stop.
		_ = client.Close()
	})
	return hb
}
