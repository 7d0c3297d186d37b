package backend_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func TestPeerDetails(t *testing.T) {
	var p backend.PeerDetails
	require.Equal(t, backend.PeerDetail{From: 0, To: 1}, p.Lookup(0, 1), "not tested yet")
	require.Equal(t, backend.SameDevice(2), p.Lookup(2, 2))
	require.True(t, p.Lookup(2, 2).Verified)

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Record(backend.PeerDetail{From: i, To: (i + 1) % 4, CanAccessPeer: true, Reason: "r"})
		}()
	}
	wg.Wait()
	for i := range 4 {
		d := p.Lookup(i, (i+1)%4)
		require.True(t, d.CanAccessPeer)
		require.Equal(t, "r", d.Reason)
	}
	p.Record(backend.PeerDetail{From: 0, To: 1, Verified: true})
	require.True(t, p.Lookup(0, 1).Verified, "a later record replaces an earlier one")
	require.False(t, p.Lookup(1, 0).Verified, "pairs are ordered")
}

// tester answers PeerTest from a table.
type tester map[[2]int]backend.PeerDetail

func (tt tester) PeerTest(_ context.Context, i, j int) (backend.PeerDetail, error) {
	if i == 2 || j == 2 {
		return backend.PeerDetail{}, errors.New("device 2 is gone")
	}
	return tt[[2]int{i, j}], nil
}

func TestPeerTestDiagnostics(t *testing.T) {
	tt := tester{
		{0, 1}: {From: 0, To: 1, Verified: true, Bytes: 256 << 10, Elapsed: 1234567 * time.Nanosecond},
		{1, 0}: {From: 1, To: 0, CanAccessPeer: true, Enabled: true, Reason: "read back wrong"},
	}
	got := backend.PeerTestDiagnostics(t.Context(), tt, 3)
	require.Equal(t, []backend.Diagnostic{
		{Check: "peer test 0->1", OK: true, Detail: "wrote and read back 256 KiB through the peer mapping in 1.235ms"},
		{Check: "peer test 0->2", Detail: "device 2 is gone"},
		{Check: "peer test 1->0", OK: true, Detail: "no peer access: read back wrong"},
		{Check: "peer test 1->2", Detail: "device 2 is gone"},
		{Check: "peer test 2->0", Detail: "device 2 is gone"},
		{Check: "peer test 2->1", Detail: "device 2 is gone"},
	}, got)
}
