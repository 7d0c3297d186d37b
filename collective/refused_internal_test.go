package collective

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/connectivity"
)

func TestUsableFor(t *testing.T) {
	b, err := fake.New(fake.WithDevices(2))
	require.NoError(t, err)
	refusal := fmt.Errorf("%w: device 0 cannot access device 1", ErrTopology)
	tests := []struct {
		name        string
		initialized bool
		refused     error
		algo        Algo
		want        []error // nil: usable
	}{
		{"rendezvoused, kernels", true, nil, OneShot, nil},
		{"rendezvoused, none", true, nil, None, nil},
		{"not rendezvoused", false, nil, None, []error{ErrNotInitialized}},
		{"refused, none", false, refusal, None, nil},
		{"refused, kernels", false, refusal, TwoShot, []error{ErrNotInitialized, ErrTopology}},
		{"refused, hcm", false, refusal, HCM, []error{ErrNotInitialized, ErrTopology}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Comm{b: b, initialized: tc.initialized, refused: tc.refused}
			err := c.usableFor(tc.algo)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			if tc.refused != nil {
				require.ErrorContains(t, err, "device 0 cannot access device 1")
				require.ErrorContains(t, err, tc.algo.String())
				require.False(t, errors.Is(err, ErrHostMismatch))
			}
		})
	}
}

func TestReaches(t *testing.T) {
	full := &Comm{rank: 1, topo: connectivity.FullyConnected}
	for peer := range 4 {
		require.True(t, full.reaches(peer), "a fully connected group reaches peer %d", peer)
	}
	m, err := fake.PresetHCM.Matrix(8)
	require.NoError(t, err)
	hcm, err := connectivity.HCMPeers(m)
	require.NoError(t, err)
	c := &Comm{rank: 0, topo: connectivity.HybridCubeMesh, hcm: hcm}
	var reached []int
	for peer := range 8 {
		if c.reaches(peer) {
			reached = append(reached, peer)
		}
	}
	require.Equal(t, []int{1, 2, 3, 4}, reached, "the quad and the cross-quad neighbour")
}
