package etcdstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/intranode/intranode/backend"
)

// leaseTTL is the TTL of the lease tests: etcd's minimum with default raft
// timing, so they run quickly.
const leaseTTL = 2 * time.Second

// envVictim makes the test binary run as a rank to be killed: its value is
// "ENDPOINT PREFIX".
const envVictim = "INTRANODE_ETCDSTORE_TEST_VICTIM"

// runVictim is a rank in a child process: it joins as member "victim",
// writes a key, says "ready <ttl>" and waits to be killed. It gives up by
// itself after a minute so it can never outlive the test for long.
func runVictim(spec string) int {
	endpoint, prefix, _ := strings.Cut(spec, " ")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := New(ctx, Config{Endpoints: []string{endpoint}, Prefix: prefix, TTL: leaseTTL, Member: "victim"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "victim:", err)
		return 1
	}
	if err := s.Set(ctx, "victim/key", []byte("alive")); err != nil {
		fmt.Fprintln(os.Stderr, "victim:", err)
		return 1
	}
	fmt.Printf("ready %v\n", s.TTL())
	<-ctx.Done()
	return 3
}

// lockedBuffer collects a child's stderr while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A rank killed while holding its lease (SIGKILL: no Close, no revoke, its
// keep-alives simply stop) is noticed by the others within the TTL plus a
// second, and its keys are gone with it.
func TestKilledRankIsNoticed(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	prefix := freshPrefix()
	observer := newStore(t, srv, Config{Prefix: prefix, TTL: leaseTTL, Member: "observer"})
	ctx := testCtx(t)

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envVictim+"="+srv.endpoint+" "+prefix)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		line <- sc.Text()
		for sc.Scan() {
		}
	}()
	select {
	case l := <-line:
		require.Equal(t, "ready "+leaseTTL.String(), l, "victim stderr: %s", stderr.String())
	case <-time.After(45 * time.Second):
		t.Fatalf("the victim did not get ready; stderr: %s", stderr.String())
	}

	// Its keep-alives hold the lease past one TTL.
	time.Sleep(leaseTTL + 500*time.Millisecond)
	members, err := observer.Members(ctx)
	require.NoError(t, err)
	require.Contains(t, members, "victim")
	v, err := observer.Get(ctx, "victim/key")
	require.NoError(t, err)
	require.Equal(t, "alive", string(v))

	require.NoError(t, cmd.Process.Kill())
	killed := time.Now()
	require.NoError(t, observer.WaitGone(ctx, "victim"))
	noticed := time.Since(killed)
	t.Logf("killed rank noticed after %v (TTL %v)", noticed, leaseTTL)
	require.LessOrEqual(t, noticed, leaseTTL+time.Second)
	ok, err := observer.Check(ctx, "victim/key")
	require.NoError(t, err)
	require.False(t, ok, "the dead rank's keys went with its lease")
	members, err = observer.Members(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"observer"}, members)
}

// Close does not revoke: peers can still read a closed rank's last values
// for one TTL, and then they go.
func TestCloseLetsKeysLapse(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	prefix := freshPrefix()
	ctx := testCtx(t)
	leaver, err := New(ctx, Config{Endpoints: []string{srv.endpoint}, Prefix: prefix, TTL: leaseTTL, Member: "leaver"})
	require.NoError(t, err)
	peer := newStore(t, srv, Config{Prefix: prefix, Member: "peer"})
	require.NoError(t, leaver.Set(ctx, "last-round", []byte("v")))

	require.NoError(t, leaver.Close())
	closed := time.Now()
	require.ErrorIs(t, leaver.Set(ctx, "k", nil), backend.ErrClosed)
	v, err := peer.Get(ctx, "last-round")
	require.NoError(t, err, "a closed rank's keys are still readable")
	require.Equal(t, "v", string(v))

	require.NoError(t, peer.WaitGone(ctx, "leaver"))
	require.LessOrEqual(t, time.Since(closed), leaseTTL+time.Second)
	ok, err := peer.Check(ctx, "last-round")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, peer.WaitGone(ctx, "never-was"), "a member that is not live is gone at once")
}

// A client whose lease ends while it lives (revoked here; expired after a
// partition longer than the TTL in practice) fails every call, pending
// ones included, with an error matching backend.ErrPeerFailed: its keys
// are gone and its peers consider it dead.
func TestLostLeaseFailsTheClient(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	prefix := freshPrefix()
	ctx := testCtx(t)
	lost := newStore(t, srv, Config{Prefix: prefix, TTL: leaseTTL, Member: "lost"})
	admin := newStore(t, srv, Config{Prefix: prefix, Member: "admin"})
	require.NoError(t, lost.Set(ctx, "k", []byte("v")))

	pending := make(chan error, 1)
	go func() {
		_, err := lost.Get(ctx, "never")
		pending <- err
	}()
	_, err := admin.cli.Revoke(ctx, clientv3.LeaseID(lost.Lease()))
	require.NoError(t, err)
	select {
	case err := <-pending:
		require.ErrorIs(t, err, backend.ErrPeerFailed)
		require.ErrorContains(t, err, `member "lost"`)
	case <-time.After(leaseTTL + 5*time.Second):
		t.Fatal("a Get pending when the lease ended did not return")
	}
	require.ErrorIs(t, lost.Set(ctx, "k", nil), backend.ErrPeerFailed)
	ok, err := admin.Check(ctx, "k")
	require.NoError(t, err)
	require.False(t, ok)
}
