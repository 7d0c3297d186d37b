//go:build linux

package plugin

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/intranode/intranode/backend"
)

// cleanupGrace bounds how long a plugin spends closing what its host left
// open before it exits.
const cleanupGrace = 10 * time.Second

// Serve serves b to the host that started this process and exits when the
// host closes the backend or goes away; it does not return. Call it from a
// plugin's main, having written nothing to stdout (go-plugin's handshake is
// a line on stdout):
//
//	func main() {
//		b, err := mybackend.New()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		plugin.Serve(b)
//	}
//
// The process exits with status 0 once serving ends (closing the devices
// the host left open and b), and with status 1, having said why on stderr,
// when it was not started by a host (run by hand, say).
func Serve(b backend.Backend) {
	log := slog.New(slog.DiscardHandler)
	if os.Getenv(EnvLog) == "debug" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	fdEnv := os.Getenv(EnvFD)
	if fdEnv == "" || os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		fmt.Fprintf(os.Stderr, "%s is an intranode backend plugin: load it with backend.Open(ctx, \"plugin:PATH\") or intranode --backend plugin:PATH\n", os.Args[0])
		os.Exit(1)
	}
	fd, err := strconv.Atoi(fdEnv)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "plugin: %s=%q is not an inherited descriptor\n", EnvFD, fdEnv)
		os.Exit(1)
	}
	srv := newServer(b, nil, log)
	var once sync.Once
	// finish releases what the host left open, but never keeps the process
	// alive: a device stuck in its driver must not leave an orphan behind.
	finish := func() {
		once.Do(func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				srv.shutdown()
				if err := b.Close(); err != nil {
					log.Debug("plugin: closing the backend", "err", err)
				}
			}()
			select {
			case <-done:
			case <-time.After(cleanupGrace):
				log.Debug("plugin: cleanup did not finish, exiting anyway", "after", cleanupGrace)
			}
		})
	}
	// The host holds the other end of this socket: when it is gone, for
	// whatever reason (Close, exit, crash, SIGKILL), the kernel closes its
	// end and this process must not outlive it.
	srv.fds, err = newFDChannel(os.NewFile(uintptr(fd), "intranode-plugin-fds"), log, func(err error) {
		log.Debug("plugin: host gone", "reason", err)
		finish()
		os.Exit(0)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "plugin: %v\n", err)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{ProtocolVersion: {PluginName: &Plugin{srv: srv}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "intranode-plugin", Level: hclog.Error, Output: os.Stderr, JSONFormat: true}),
	})
	finish()
	os.Exit(0)
}
