package connectivity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDetect(t *testing.T) {
	oneWay := NewMatrix(LinkNVLink, 2)
	oneWay.Set(0, 1, 4)
	hcmOneWayCross := dgx1()
	hcmOneWayCross.Set(4, 0, 0)

	tests := []struct {
		name string
		m    Matrix
		want Topology
	}{
		{"DGX-1 hybrid cube mesh", dgx1(), HybridCubeMesh},
		{"8 GPUs NV18 through NVSwitch", nvswitch(8, 18), FullyConnected},
		{"2xH200 NV18", nvswitch(2, 18), FullyConnected},
		{"4 GPUs xGMI all pairs", func() Matrix { m := nvswitch(4, 1); m.Kind = LinkXGMI; return m }(), FullyConnected},
		{"4-GPU partial mesh", ring4(), Unknown},
		{"2 GPUs PCIe only", NewMatrix(LinkNVLink, 2), Unknown},
		{"one-way link", oneWay, Unknown},
		{"DGX-1 missing cross link 3-7", withLink(dgx1(), 3, 7, 0), Unknown},
		{"DGX-1 cross link one way only", hcmOneWayCross, Unknown},
		{"DGX-1 plus a second cross link", withLink(dgx1(), 0, 5, 1), Unknown},
		{"DGX-1 missing a quad link", withLink(dgx1(), 0, 1, 0), Unknown},
		{"8 devices of degree 4, not two quads", circulant8(), Unknown},
		{"3-cube", cube(), Unknown},
		{"single device", NewMatrix(LinkNVLink, 1), Unknown},
		{"no devices", NewMatrix(LinkNVLink, 0), Unknown},
		{"ragged matrix", Matrix{Kind: LinkNVLink, Links: [][]int{{0, 1}, {1}}}, Unknown},
		{"negative count", fromRows(LinkNVLink, [][]int{{0, -1}, {1, 0}}), Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Detect(tc.m))
		})
	}
}

func TestDetectGroup(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		m       Matrix
		devices []int
		want    Topology
		wantErr error
	}{
		{name: "DGX-1 whole box", m: dgx1(), devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, want: HybridCubeMesh},
		{name: "DGX-1 ranks interleaving the quads", m: dgx1(), devices: []int{0, 4, 1, 5, 2, 6, 3, 7}, want: HybridCubeMesh},
		{name: "DGX-1 first quad", m: dgx1(), devices: []int{0, 1, 2, 3}, want: FullyConnected},
		{name: "DGX-1 second quad reversed", m: dgx1(), devices: []int{7, 6, 5, 4}, want: FullyConnected},
		{name: "DGX-1 cross pair", m: dgx1(), devices: []int{4, 0}, want: FullyConnected},
		{name: "DGX-1 devices 5 and 2 are not linked", m: dgx1(), devices: []int{5, 2}, want: Unknown},
		{name: "DGX-1 five devices", m: dgx1(), devices: []int{0, 1, 2, 3, 4}, want: Unknown},
		{name: "NVSwitch pair", m: nvswitch(8, 18), devices: []int{7, 3}, want: FullyConnected},
		{name: "single rank", m: nvswitch(8, 18), devices: []int{3}, want: Unknown},
		{name: "device listed twice", m: nvswitch(8, 18), devices: []int{1, 1}, want: Unknown},
		{name: "env 1 forces", env: "1", m: dgx1(), devices: []int{5, 2}, want: FullyConnected},
		{name: "env true forces", env: "true", m: NewMatrix(LinkNVLink, 2), devices: []int{0, 1}, want: FullyConnected},
		{name: "env forces a device listed twice", env: "1", m: NewMatrix(LinkShared, 1), devices: []int{0, 0}, want: FullyConnected},
		{name: "env forces over HCM", env: "1", m: dgx1(), devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, want: FullyConnected},
		{name: "env 0 does not force", env: "0", m: dgx1(), devices: []int{5, 2}, want: Unknown},
		{name: "env garbage does not force", env: "please", m: dgx1(), devices: []int{5, 2}, want: Unknown},
		{name: "no devices", m: dgx1(), devices: nil, wantErr: ErrInvalidGroup},
		{name: "nine devices", m: nvswitch(9, 1), devices: []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, wantErr: ErrInvalidGroup},
		{name: "device out of range", m: dgx1(), devices: []int{0, 8}, wantErr: ErrInvalidGroup},
		{name: "negative device", m: dgx1(), devices: []int{-1, 0}, wantErr: ErrInvalidGroup},
		{name: "invalid matrix", m: Matrix{Links: [][]int{{0, 1}, {1}}}, devices: []int{0, 1}, wantErr: ErrInvalidGroup},
		{name: "env does not hide errors", env: "1", m: dgx1(), devices: []int{0, 9}, wantErr: ErrInvalidGroup},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvForceFullyConnected, tc.env)
			got, err := DetectGroup(tc.m, tc.devices)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Equal(t, Unknown, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestForcedFullyConnected(t *testing.T) {
	tests := []struct {
		env  string
		want bool
	}{
		{"", false}, {"1", true}, {"true", true}, {"TRUE", true}, {"0", false}, {"false", false}, {"yes", false},
	}
	for _, tc := range tests {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(EnvForceFullyConnected, tc.env)
			require.Equal(t, tc.want, ForcedFullyConnected())
		})
	}
}

func TestHCMPeers(t *testing.T) {
	interleaved, err := dgx1().Sub([]int{0, 4, 1, 5, 2, 6, 3, 7})
	require.NoError(t, err)
	reversed, err := dgx1().Sub([]int{7, 6, 5, 4, 3, 2, 1, 0})
	require.NoError(t, err)

	tests := []struct {
		name string
		m    Matrix
		want [][4]int
	}{
		{"DGX-1", dgx1(), dgx1Peers},
		{"DGX-1 ranks interleaving the quads", interleaved, [][4]int{
			{2, 4, 6, 1}, {3, 5, 7, 0}, {0, 4, 6, 3}, {1, 5, 7, 2},
			{0, 2, 6, 5}, {1, 3, 7, 4}, {0, 2, 4, 7}, {1, 3, 5, 6},
		}},
		{"DGX-1 reversed", reversed, [][4]int{
			{1, 2, 3, 4}, {0, 2, 3, 5}, {0, 1, 3, 6}, {0, 1, 2, 7},
			{5, 6, 7, 0}, {4, 6, 7, 1}, {4, 5, 7, 2}, {4, 5, 6, 3},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HCMPeers(tc.m)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			for r, p := range got {
				for _, q := range p {
					require.True(t, tc.m.Linked(r, q), "rank %d and its peer %d are linked", r, q)
				}
			}
		})
	}
}

func TestHCMPeersRejects(t *testing.T) {
	tests := []struct {
		name string
		m    Matrix
	}{
		{"NVSwitch", nvswitch(8, 18)},
		{"DGX-1 missing cross link", withLink(dgx1(), 2, 6, 0)},
		{"4-GPU partial mesh", ring4()},
		{"degree 4 but no quads", circulant8()},
		{"empty", Matrix{}},
		{"ragged", Matrix{Links: [][]int{{0}, {}, {}, {}, {}, {}, {}, {}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HCMPeers(tc.m)
			require.ErrorIs(t, err, ErrNotHybridCubeMesh)
			require.Nil(t, got)
		})
	}
}

func TestMatrixLinks(t *testing.T) {
	asym := fromRows(LinkNVLink, [][]int{{0, 2, 1}, {2, 0, 0}, {0, 0, 0}})
	tests := []struct {
		name       string
		m          Matrix
		symmetric  bool
		neighbours [][]int
	}{
		{"DGX-1", dgx1(), true, [][]int{
			{1, 2, 3, 4}, {0, 2, 3, 5}, {0, 1, 3, 6}, {0, 1, 2, 7},
			{0, 5, 6, 7}, {1, 4, 6, 7}, {2, 4, 5, 7}, {3, 4, 5, 6},
		}},
		{"one-way link is no neighbour", asym, false, [][]int{{1}, {0}, nil}},
		{"no links", NewMatrix(LinkXGMI, 2), true, [][]int{nil, nil}},
		{"unequal counts", fromRows(LinkNVLink, [][]int{{0, 2}, {1, 0}}), false, [][]int{{1}, {0}}},
		{"empty", Matrix{}, true, [][]int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.symmetric, tc.m.Symmetric())
			got := make([][]int, tc.m.Size())
			for i := range got {
				got[i] = tc.m.Neighbours(i)
				require.False(t, tc.m.Linked(i, i), "device %d is not its own neighbour", i)
			}
			require.Equal(t, tc.neighbours, got)
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		m       Matrix
		wantErr string
	}{
		{"valid", dgx1(), ""},
		{"empty", Matrix{}, ""},
		{"short row", Matrix{Links: [][]int{{0, 1}, {1}}}, "row 1 has 1 entries, want 2"},
		{"long row", Matrix{Links: [][]int{{0, 1, 1}, {1, 0}}}, "row 0 has 3 entries, want 2"},
		{"negative count", fromRows(LinkNVLink, [][]int{{0, 1}, {-2, 0}}), "negative link count -2 at [1][0]"},
		{"diagonal", fromRows(LinkNVLink, [][]int{{0, 1}, {1, 3}}), "diagonal entry [1][1] is 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
