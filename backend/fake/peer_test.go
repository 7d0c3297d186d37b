//go:build linux

package fake_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
)

func TestParseBrokenP2P(t *testing.T) {
	tests := []struct {
		in      string
		want    [][2]int
		wantErr string
	}{
		{"0-1", [][2]int{{0, 1}, {1, 0}}, ""},
		{"0>1", [][2]int{{0, 1}}, ""},
		{" 0-1 , 2>3,", [][2]int{{0, 1}, {1, 0}, {2, 3}}, ""},
		{"", nil, "no pairs"},
		{"1-1", nil, "own memory"},
		{"0:1", nil, "want I-J"},
		{"a-b", nil, "want I-J"},
		{"0>", nil, "want I-J"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := fake.ParseBrokenP2P(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestBrokenP2P(t *testing.T) {
	tests := []struct {
		name   string
		env    string // EnvBrokenP2P for backend.Open; New with opts otherwise
		opts   []fake.Option
		broken [][2]int
		by     string
	}{
		{"option, one direction", "", []fake.Option{fake.WithDevices(4), fake.WithBrokenP2P([2]int{0, 1})},
			[][2]int{{0, 1}}, "fake.WithBrokenP2P"},
		{"environment, both directions", "0-1,3>2", nil, [][2]int{{0, 1}, {1, 0}, {3, 2}}, fake.EnvBrokenP2P},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var b backend.Backend
			var err error
			if tc.env != "" {
				t.Setenv(fake.EnvDevices, "4")
				t.Setenv(fake.EnvTopology, "")
				t.Setenv(fake.EnvBrokenP2P, tc.env)
				b, err = backend.Open(ctx, "fake")
			} else {
				b, err = fake.New(tc.opts...)
			}
			require.NoError(t, err)
			defer b.Close()
			tester, ok := b.(backend.PeerTester)
			require.True(t, ok, "the fake implements backend.PeerTester")
			m, err := b.LinkMatrix(ctx)
			require.NoError(t, err)
			isBroken := map[[2]int]bool{}
			for _, p := range tc.broken {
				isBroken[p] = true
			}
			for i := range 4 {
				for j := range 4 {
					ok, err := b.PeerAccess(ctx, i, j)
					require.NoError(t, err)
					d, err := tester.PeerTest(ctx, i, j)
					require.NoError(t, err)
					require.Equal(t, ok, d.Verified, "PeerTest(%d,%d) agrees with PeerAccess", i, j)
					require.Equal(t, i, d.From)
					require.Equal(t, j, d.To)
					if i == j {
						require.True(t, ok)
						require.Equal(t, backend.SameDevice(i), d)
						continue
					}
					require.Positive(t, m.At(i, j), "links stay in the matrix")
					require.Equal(t, !isBroken[[2]int{i, j}], ok, "PeerAccess(%d,%d)", i, j)
					if isBroken[[2]int{i, j}] {
						require.True(t, d.CanAccessPeer)
						require.True(t, d.Enabled)
						require.Equal(t, "write through the peer mapping read back 0x00 at byte 0, want 0xa5 ("+tc.by+")", d.Reason)
					} else {
						require.Empty(t, d.Reason)
					}
				}
			}
		})
	}
}

func TestPeerTestUnlinked(t *testing.T) {
	b, err := fake.New(fake.WithDevices(4), fake.WithTopology(fake.PresetRing))
	require.NoError(t, err)
	d, err := b.PeerTest(t.Context(), 0, 2)
	require.NoError(t, err)
	require.False(t, d.CanAccessPeer)
	require.False(t, d.Verified)
	require.Contains(t, d.Reason, `not linked in the fake's "ring" topology`)
	_, err = b.PeerTest(t.Context(), 0, 4)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestBrokenP2PErrors(t *testing.T) {
	tests := []struct {
		name string
		opts []fake.Option
		env  string
		msgs []string
	}{
		{"device out of range", []fake.Option{fake.WithDevices(2), fake.WithBrokenP2P([2]int{0, 5})}, "", []string{"0>5", "devices are 0 to 1"}},
		{"same device", []fake.Option{fake.WithBrokenP2P([2]int{1, 1})}, "", []string{"1>1", "own memory"}},
		{"bad environment", nil, "0~1", []string{fake.EnvBrokenP2P, `"0~1"`, "want I-J"}},
		{"environment out of range", nil, "0-9", []string{"devices are 0 to 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.env != "" {
				t.Setenv(fake.EnvDevices, "4")
				t.Setenv(fake.EnvTopology, "")
				t.Setenv(fake.EnvBrokenP2P, tc.env)
				_, err = backend.Open(t.Context(), "fake")
			} else {
				_, err = fake.New(tc.opts...)
			}
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			for _, m := range tc.msgs {
				require.ErrorContains(t, err, m)
			}
		})
	}
}
