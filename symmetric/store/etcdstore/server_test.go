package etcdstore

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// testServer is a real etcd server running in the test process.
type testServer struct {
	etcd     *embed.Etcd
	endpoint string // host:port of its client listener
}

// startServer starts a single-member etcd on random loopback ports with
// its data in a temporary directory, silenced, and stops it when t ends.
// configure may adjust the configuration (TLS, auth) before it starts.
func startServer(t testing.TB, configure ...func(*embed.Config)) *testServer {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "intranode-test"
	cfg.Dir = t.TempDir()
	client, err := url.Parse("http://127.0.0.1:0")
	require.NoError(t, err)
	peer, err := url.Parse("http://127.0.0.1:0")
	require.NoError(t, err)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	for _, c := range configure {
		c(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd failed to start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("etcd did not become ready in 60 s")
	}
	return &testServer{etcd: e, endpoint: e.Clients[0].Addr().String()}
}
