package conformance_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/intranode/intranode/conformance"
	"github.com/intranode/intranode/symmetric/store"
	_ "github.com/intranode/intranode/symmetric/store/etcdstore" // etcd:// for the parent and its children
	"github.com/intranode/intranode/symmetric/store/etcdstore/etcdtest"
)

// overEtcd selects a few cases that rendezvous, all-reduce and barrier,
// and two fault cases: one that kills a rank (through the store) and one
// that needs the harness's own TCP store.
var overEtcd = regexp.MustCompile(`^(rendezvous/success|allreduce/ops|collective/barrier|faults/kill-barrier|faults/bad-store-client)$`)

// TestFakeOverEtcd runs cases with every rank opening the URL of a real
// etcd itself, as `intranode conformance --store etcd://…` has them do, in
// both modes; each case must meet under a prefix of its own.
func TestFakeOverEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	for _, mode := range []conformance.Mode{conformance.Goroutines, conformance.Processes} {
		t.Run(string(mode), func(t *testing.T) {
			jobPrefix := "/intranode-test/" + string(mode)
			var results []conformance.Result
			_, err := conformance.Run(context.Background(), conformance.Config{Backend: "fake", Mode: mode,
				Worlds: []int{2}, Quick: true, ChildArgs: []string{"-test.run=^$"}, Timeout: time.Minute,
				StoreURL: srv.URL(jobPrefix), Faults: true, FaultDeadline: time.Second, Filter: overEtcd.MatchString},
				func(r conformance.Result) { results = append(results, r) })
			require.NoError(t, err)
			status := map[string]conformance.Status{}
			for _, r := range results {
				require.NotEqual(t, conformance.Fail, r.Status, "%s: %s", r.Case, r.Reason)
				status[r.Case] = r.Status
			}
			want := map[string]conformance.Status{"rendezvous/success": conformance.Pass,
				"allreduce/ops": conformance.Pass, "collective/barrier": conformance.Pass,
				"faults/kill-barrier": conformance.Pass, "faults/bad-store-client": conformance.Skipped}
			if mode == conformance.Goroutines {
				// A rank killed must be a process of its own.
				want["faults/kill-barrier"] = conformance.Skipped
			}
			require.Equal(t, want, status)

			// The ranks met in etcd, each case under a fresh prefix.
			cases := casePrefixes(t, srv, jobPrefix)
			require.GreaterOrEqual(t, len(cases), 3, "cases met under %v", cases)
		})
	}
}

// casePrefixes lists the distinct case prefixes that hold keys in the
// etcd job at jobPrefix (keys live under "<job>/k/").
func casePrefixes(t *testing.T, srv *etcdtest.Server, jobPrefix string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	keys := jobPrefix + "/k/"
	resp, err := cli.Get(ctx, keys, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	out := map[string]bool{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), keys)
		parts := strings.SplitN(rest, "/", 3)
		require.Len(t, parts, 3, "key %q is outside any case's prefix", kv.Key)
		require.Equal(t, "intranode-conformance", parts[0], "key %q", kv.Key)
		out[parts[1]] = true
	}
	return out
}

// TestStoreURLRefused checks that a store URL the ranks could not all
// meet through is refused before any case runs.
func TestStoreURLRefused(t *testing.T) {
	tests := []struct {
		name string
		cfg  conformance.Config
		want string
	}{
		{"serving tcp", conformance.Config{StoreURL: "tcp://127.0.0.1:0?serve=1"}, "cannot each serve"},
		{"mem across processes", conformance.Config{Mode: conformance.Processes, StoreURL: "mem://suite"}, "one process"},
		{"unnamed mem", conformance.Config{StoreURL: "mem://"}, "unnamed"},
		{"unknown scheme", conformance.Config{StoreURL: "gopher://host:70/x"}, `scheme "gopher" is not linked`},
		{"with NewStores", conformance.Config{StoreURL: "mem://suite",
			NewStores: func(context.Context, int) ([]store.Store, func(), error) { return nil, nil, nil }}, "exclude each other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Backend = "fake"
			ran := false
			tc.cfg.Filter = func(string) bool { ran = true; return false }
			_, err := conformance.Run(context.Background(), tc.cfg, nil)
			require.ErrorContains(t, err, tc.want)
			require.False(t, ran, "no case is considered")
		})
	}
}

// TestNamedMemStoreURL runs cases with goroutine ranks each opening a
// named in-process store by URL.
func TestNamedMemStoreURL(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Backend: "fake", Worlds: []int{2, 4}, Quick: true, StoreURL: "mem://suite",
		Filter: func(name string) bool { return name == "rendezvous/success" || name == "collective/barrier" }})
}
