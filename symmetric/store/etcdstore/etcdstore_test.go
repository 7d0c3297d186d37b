package etcdstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/internal/race"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
	"github.com/intranode/intranode/symmetric/store/storetest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(envVictim); spec != "" {
		os.Exit(runVictim(spec))
	}
	launch.QuietRaceExit()
	race.ShareCores()
	os.Exit(m.Run())
}

var prefixes atomic.Int64

// freshPrefix gives every store of a test its own job prefix, so one
// server serves many fresh, empty stores.
func freshPrefix() string {
	return fmt.Sprintf("/intranode-test/%d-%d", os.Getpid(), prefixes.Add(1))
}

// newStore connects a client to srv (cfg's endpoints and prefix default to
// srv's and a fresh one) and closes it when t ends.
func newStore(t testing.TB, srv *testServer, cfg Config, opts ...store.Option) *Store {
	t.Helper()
	if cfg.Endpoints == nil {
		cfg.Endpoints = []string{srv.endpoint}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = freshPrefix()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestConformance runs the shared store suite with every client its own
// etcd connection and lease, as every rank of a job has.
func TestConformance(t *testing.T) {
	srv := startServer(t)
	storetest.Run(t, storetest.HarnessFunc(func(t *testing.T, n int) []store.Store {
		prefix := freshPrefix()
		clients := make([]store.Store, n)
		for i := range clients {
			clients[i] = newStore(t, srv, Config{Prefix: prefix, Member: fmt.Sprintf("client%d", i)})
		}
		return clients
	}))
}

// Gets racing the Sets they wait for never miss one: a Set that lands
// between a Get's read and its watch is in the watch, which starts at the
// read's revision.
func TestGetNeverMissesASet(t *testing.T) {
	srv := startServer(t)
	prefix := freshPrefix()
	reader := newStore(t, srv, Config{Prefix: prefix})
	writer := newStore(t, srv, Config{Prefix: prefix})
	ctx := testCtx(t)
	const keys = 200
	errs := make([]error, keys)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(2)
		key := fmt.Sprintf("race/%d", i)
		go func() {
			defer wg.Done()
			v, err := reader.Get(ctx, key)
			if err == nil && string(v) != key {
				err = fmt.Errorf("got %q for %q", v, key)
			}
			errs[i] = err
		}()
		go func() {
			defer wg.Done()
			if err := writer.Set(ctx, key, []byte(key)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// A watch whose start revision was compacted away ends without an answer,
// so the caller reads again instead of waiting forever.
func TestWatchFromCompactedRevisionRetries(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv, Config{})
	ctx := testCtx(t)
	for i := range 5 {
		require.NoError(t, s.Set(ctx, "churn", []byte{byte(i)}))
	}
	resp, err := s.cli.Get(ctx, s.key("churn"))
	require.NoError(t, err)
	_, err = s.cli.Compact(ctx, resp.Header.Revision)
	require.NoError(t, err)
	v, ok, err := s.watch(ctx, "get", s.key("late"), "late", 1, true)
	require.NoError(t, err)
	require.False(t, ok)
	require.Nil(t, v)

	// Get goes on from a fresh read and finds the key.
	got := make(chan []byte, 1)
	go func() {
		v, _ := s.Get(ctx, "late")
		got <- v
	}()
	require.NoError(t, s.Set(ctx, "late", []byte("here")))
	require.Equal(t, "here", string(<-got))
}

func TestKeysLiveUnderThePrefix(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv, Config{Prefix: "/intranode/layout-job/", Member: "rank0"})
	ctx := testCtx(t)
	require.Equal(t, "/intranode/layout-job/", s.Prefix())
	require.NoError(t, s.Set(ctx, "handshake-0/0/0", []byte("x")))
	resp, err := s.cli.Get(ctx, "/intranode/layout-job/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	require.ElementsMatch(t, []string{"/intranode/layout-job/k/handshake-0/0/0", "/intranode/layout-job/m/rank0"}, keys)
	got, err := s.cli.Get(ctx, "/intranode/layout-job/k/handshake-0/0/0")
	require.NoError(t, err)
	require.Equal(t, int64(s.lease), got.Kvs[0].Lease, "keys carry the client's lease")
}

// Values over etcd's request limit (1.5 MiB by default), and over gRPC's
// message limit above it, are refused as invalid, not as an outage.
func TestValuesBeyondTheRequestLimit(t *testing.T) {
	srv := startServer(t)
	s := newStore(t, srv, Config{})
	for _, n := range []int{1600 << 10, 3 << 20} {
		err := s.Set(testCtx(t), "huge", make([]byte, n))
		require.ErrorIs(t, err, backend.ErrInvalidArgument, "%d bytes", n)
		_, err = s.CompareAndSet(testCtx(t), "huge", nil, make([]byte, n))
		require.ErrorIs(t, err, backend.ErrInvalidArgument, "%d bytes", n)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no endpoints", Config{Prefix: "/job"}},
		{"no prefix", Config{Endpoints: []string{"127.0.0.1:1"}}},
		{"root prefix", Config{Endpoints: []string{"127.0.0.1:1"}, Prefix: "///"}},
		{"negative ttl", Config{Endpoints: []string{"127.0.0.1:1"}, Prefix: "/job", TTL: -time.Second}},
		{"slash in member", Config{Endpoints: []string{"127.0.0.1:1"}, Prefix: "/job", Member: "a/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(testCtx(t), tc.cfg)
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
		})
	}
}

// An unreachable etcd fails New within its deadline, not after the
// store's five-minute default.
func TestNewUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = New(ctx, Config{Endpoints: []string{addr}, Prefix: freshPrefix()})
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.Less(t, time.Since(start), 20*time.Second)
}

func TestDuplicateMemberRefused(t *testing.T) {
	srv := startServer(t)
	prefix := freshPrefix()
	first := newStore(t, srv, Config{Prefix: prefix, Member: "rank0"})
	_, err := New(testCtx(t), Config{Endpoints: []string{srv.endpoint}, Prefix: prefix, Member: "rank0"})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, `member "rank0"`)
	require.ErrorContains(t, err, "already live")
	members, err := first.Members(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"rank0"}, members, "the refused client left nothing behind")

	// Without a name, the lease ID names the member.
	anon := newStore(t, srv, Config{Prefix: prefix})
	require.Equal(t, fmt.Sprintf("%x", anon.Lease()), anon.Member())
	members, err = first.Members(testCtx(t))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"rank0", anon.Member()}, members)
}
