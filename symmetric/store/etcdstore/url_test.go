package etcdstore

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

func TestConfigFromURL(t *testing.T) {
	t.Setenv(EnvPassword, "from-env")
	tests := []struct {
		name string
		url  string
		want Config
	}{
		{"plain", "etcd://127.0.0.1:2379/intranode/job-1",
			Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/intranode/job-1"}},
		{"several endpoints and settings", "etcd://a:2379,b:2379,10.0.0.3:2379/job?ttl=3s&member=rank7",
			Config{Endpoints: []string{"http://a:2379", "http://b:2379", "http://10.0.0.3:2379"}, Prefix: "/job", TTL: 3 * time.Second,
				Member: "rank7"}},
		{"ipv6", "etcd://[::1]:2379/job", Config{Endpoints: []string{"http://[::1]:2379"}, Prefix: "/job"}},
		{"user and password", "etcd://alice:pw@h:1/job", Config{Endpoints: []string{"http://h:1"}, Prefix: "/job",
			Username: "alice", Password: "pw"}},
		{"password from the environment", "etcd://alice@h:1/job", Config{Endpoints: []string{"http://h:1"}, Prefix: "/job",
			Username: "alice", Password: "from-env"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			require.NoError(t, err)
			got, err := ConfigFromURL(u)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	t.Run("tls", func(t *testing.T) {
		u, err := url.Parse("etcd://h:1/job?tls=1")
		require.NoError(t, err)
		got, err := ConfigFromURL(u)
		require.NoError(t, err)
		require.NotNil(t, got.TLS)
		require.Equal(t, []string{"https://h:1"}, got.Endpoints)
	})

	bad := []struct {
		name, url string
	}{
		{"no prefix", "etcd://h:1"},
		{"root prefix", "etcd://h:1/"},
		{"no port", "etcd://h/job"},
		{"empty endpoint", "etcd://h:1,,h:2/job"},
		{"bad ttl", "etcd://h:1/job?ttl=soon"},
		{"zero ttl", "etcd://h:1/job?ttl=0s"},
		{"bad tls", "etcd://h:1/job?tls=perhaps"},
		{"cert without key", "etcd://h:1/job?cert=/c.pem"},
		{"missing ca file", "etcd://h:1/job?cacert=/nonexistent/ca.pem"},
		{"unknown parameter", "etcd://h:1/job?ttl=2s&lease=5"},
		{"opaque", "etcd:h:1/job"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			require.NoError(t, err)
			_, err = ConfigFromURL(u)
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
		})
	}
	t.Run("password redacted", func(t *testing.T) {
		u, err := url.Parse("etcd://alice:hunter2@h:1/")
		require.NoError(t, err)
		_, err = ConfigFromURL(u)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "hunter2")
	})
}

// store.Open reaches this package through the registered scheme.
func TestStoreOpenEtcdURL(t *testing.T) {
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := fmt.Sprintf("etcd://%s%s?ttl=3s&member=rank0", srv.endpoint, freshPrefix())
	st, err := store.Open(ctx, raw, store.WithTimeout(time.Minute))
	require.NoError(t, err)
	defer st.Close()
	s, ok := st.(*Store)
	require.True(t, ok)
	require.Equal(t, 3*time.Second, s.TTL())
	require.Equal(t, "rank0", s.Member())
	require.NoError(t, st.Set(ctx, "k", []byte("v")))
	v, err := st.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(v))
	require.Contains(t, store.Schemes(), Scheme)
}
