package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/symmetric/store/etcdstore/etcdtest"
)

// TestConformanceStoreURL runs a few cases with every rank opening a real
// etcd by URL, ranks as processes (the test binary re-executed) and as
// goroutines.
func TestConformanceStoreURL(t *testing.T) {
	srv := etcdtest.Start(t)
	for _, tc := range []struct {
		procs, mode string
	}{{"true", "processes"}, {"false", "goroutines"}} {
		t.Run(tc.mode, func(t *testing.T) {
			url := srv.URL("intranode-cli-test/" + tc.mode)
			out, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--procs="+tc.procs, "--store", url,
				"--world", "2", "--quick", "--run", "^(rendezvous/success|allreduce/ops)$")
			require.Equal(t, 0, code, stderr+out)
			require.Contains(t, out, "2 passed, 0 failed, 0 skipped (2 cases, mode "+tc.mode+", store "+url+",")
		})
	}
}

func TestConformanceStoreURLRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"serving tcp", []string{"--store", "tcp://127.0.0.1:0?serve=1"}, 2, "cannot each serve"},
		{"mem across processes", []string{"--store", "mem://suite"}, 2, "one process"},
		{"unnamed mem", []string{"--procs=false", "--store", "mem://"}, 2, "unnamed"},
		{"etcd member", []string{"--store", "etcd://127.0.0.1:1/job?member=rank0"}, 2, "every rank would claim it"},
		{"unknown scheme", []string{"--store", "gopher://host:70/x"}, 1, "not linked"},
		{"password redacted", []string{"--store", "gopher://user:hunter2@host:70/x"}, 1, "user:xxxxx@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"conformance", "--backend", "fake", "--world", "2", "--run", "^rendezvous/success$"}, tc.args...)
			_, stderr, code := runCLI(t, args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.want)
			require.NotContains(t, stderr, "hunter2")
		})
	}
	out, stderr, code := runCLI(t, "conformance", "--backend", "fake", "--procs=false", "--store", "mem://suite",
		"--world", "2", "--run", "^rendezvous/success$")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "1 passed, 0 failed, 0 skipped (1 cases, mode goroutines, store mem://suite,")
}
