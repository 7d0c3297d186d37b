package etcdstore

import (
	"testing"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/intranode/intranode/symmetric/store/etcdstore/etcdtest"
)

// testServer is a real etcd server running in the test process.
type testServer struct {
	endpoint string // host:port of its client listener
}

// startServer starts a single-member etcd on random loopback ports with
// its data in a temporary directory, silenced, and stops it when t ends.
// configure may adjust the configuration (TLS, auth) before it starts.
func startServer(t testing.TB, configure ...func(*embed.Config)) *testServer {
	t.Helper()
	return &testServer{endpoint: etcdtest.Start(t, configure...).Endpoint}
}
