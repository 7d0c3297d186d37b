package symmetric

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
)

func TestPeerVerdict(t *testing.T) {
	infos := []peerInfo{{Device: 4}, {Device: 5}, {Device: 6}}
	tests := []struct {
		name string
		all  [][]byte
		want error
		msg  string
	}{
		{"every check passed", [][]byte{nil, nil, nil}, nil, ""},
		{"one pair", [][]byte{nil, denials{{Rank: 2, Reason: "why"}}.encode(), nil}, ErrPeerAccess,
			"symmetric: peer access failed: device 5 cannot access device 6 (rank 1 → rank 2): why"},
		{"pairs in rank order", [][]byte{denials{{Rank: 1, Reason: "a"}}.encode(), nil, denials{{Rank: 0, Reason: "b"}}.encode()}, ErrPeerAccess,
			"device 4 cannot access device 5 (rank 0 → rank 1): a; device 6 cannot access device 4 (rank 2 → rank 0): b"},
		{"malformed", [][]byte{nil, []byte("{"), nil}, backend.ErrInvalidArgument, "rank 1 sent a malformed peer-access verdict"},
		{"rank out of range", [][]byte{denials{{Rank: 3}}.encode(), nil, nil}, backend.ErrInvalidArgument, "about rank 3 of 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := peerVerdict(tc.all, infos)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	require.Nil(t, denials(nil).encode(), "no failures send what a plain barrier sends")
}
