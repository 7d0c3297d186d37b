package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/intranode/intranode/symmetric/store"
	_ "github.com/intranode/intranode/symmetric/store/etcdstore"
	"github.com/intranode/intranode/symmetric/store/etcdstore/etcdtest"
)

func TestStartServesStoreURLs(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name, prefix, want string
	}{
		{"plain prefix", "intranode/job-1", "etcd://" + srv.Endpoint + "/intranode/job-1"},
		{"leading slash", "/intranode/job-2", "etcd://" + srv.Endpoint + "/intranode/job-2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := srv.URL(tc.prefix)
			require.Equal(t, tc.want, raw)
			a, err := store.Open(ctx, raw)
			require.NoError(t, err)
			defer a.Close()
			b, err := store.Open(ctx, raw)
			require.NoError(t, err)
			defer b.Close()
			require.NoError(t, a.Set(ctx, "k", []byte(tc.name)))
			got, err := b.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, tc.name, string(got))
		})
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	_, err := etcdtest.New(t.TempDir(), func(cfg *embed.Config) { cfg.Name = "" })
	require.Error(t, err)
}
