// Package etcdtest runs a real etcd server inside a test process, so that
// tests anywhere in the module can exercise the etcd store (and commands
// given an etcd:// URL) without an etcd installation: a single member on
// random loopback ports with its data in a temporary directory, silenced.
// Child processes of the test reach it like any other etcd.
//
// It links the etcd server; import it from tests only.
package etcdtest

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds how long New waits for the server to become ready.
const StartTimeout = 60 * time.Second

// Server is a single-member etcd running in this process.
type Server struct {
	// Etcd is the embedded server, for tests that need more of it.
	Etcd *embed.Etcd
	// Endpoint is the HOST:PORT of its client listener.
	Endpoint string
}

// New starts a server with its data in dir (which must exist and be
// empty) and waits until it serves. configure, if given, adjusts the
// configuration (TLS, auth, limits) before it starts. Close stops it.
func New(dir string, configure ...func(*embed.Config)) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Name = "intranode-test"
	cfg.Dir = dir
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{loopback}, []url.URL{loopback}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{loopback}, []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	for _, c := range configure {
		c(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd failed to start: %w", err)
	case <-time.After(StartTimeout):
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd did not become ready in %v", StartTimeout)
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, errors.New("etcdtest: etcd has no client listener")
	}
	return &Server{Etcd: e, Endpoint: e.Clients[0].Addr().String()}, nil
}

// Start starts a server for t with its data in t.TempDir() and stops it
// when t ends; it fails t if the server does not start.
func Start(t testing.TB, configure ...func(*embed.Config)) *Server {
	t.Helper()
	s, err := New(t.TempDir(), configure...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL returns the etcd:// URL of the server with the given key prefix
// ("intranode/job-42"; a leading slash is optional), as store.Open takes
// it once package etcdstore is imported. The URL is plain http: a server
// configured for TLS needs the tls or cacert parameter added.
func (s *Server) URL(prefix string) string {
	return "etcd://" + s.Endpoint + "/" + strings.TrimPrefix(prefix, "/")
}

// Close stops the server.
func (s *Server) Close() { s.Etcd.Close() }
