package connectivity

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatrixJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		m    Matrix
	}{
		{"DGX-1", dgx1()},
		{"2xH200", nvswitch(2, 18)},
		{"xGMI", fromRows(LinkXGMI, [][]int{{0, 1}, {1, 0}})},
		{"fake asymmetric", fromRows(LinkShared, [][]int{{0, 1, 0}, {2, 0, 0}, {0, 0, 0}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.m)
			require.NoError(t, err)
			var back Matrix
			require.NoError(t, json.Unmarshal(data, &back))
			require.Equal(t, tc.m, back)
			parsed, err := ParseMatrix(data)
			require.NoError(t, err)
			require.Equal(t, tc.m, parsed)
			require.Equal(t, Detect(tc.m), Detect(parsed))
		})
	}
}

func TestMatrixJSONForm(t *testing.T) {
	data, err := json.Marshal(nvswitch(2, 18))
	require.NoError(t, err)
	require.JSONEq(t, `{"kind":"nvlink","links":[[0,18],[18,0]]}`, string(data))
}

func TestParseMatrixErrors(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
	}{
		{"not JSON", `{"kind":`, "decoding matrix"},
		{"wrong type", `{"kind":"nvlink","links":"many"}`, "decoding matrix"},
		{"ragged", `{"kind":"nvlink","links":[[0,1],[1]]}`, "row 1 has 1 entries"},
		{"negative", `{"kind":"xgmi","links":[[0,-1],[1,0]]}`, "negative link count"},
		{"diagonal", `{"kind":"shared","links":[[1,1],[1,0]]}`, "diagonal entry [0][0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMatrix([]byte(tc.data))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestTopologyText(t *testing.T) {
	tests := []struct {
		topo Topology
		text string
	}{
		{Unknown, "Unknown"},
		{FullyConnected, "FullyConnected"},
		{HybridCubeMesh, "HybridCubeMesh"},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			data, err := json.Marshal(map[string]Topology{"topology": tc.topo})
			require.NoError(t, err)
			require.JSONEq(t, `{"topology":"`+tc.text+`"}`, string(data))
			var back map[string]Topology
			require.NoError(t, json.Unmarshal(data, &back))
			require.Equal(t, tc.topo, back["topology"])
			parsed, err := ParseTopology(tc.text)
			require.NoError(t, err)
			require.Equal(t, tc.topo, parsed)
		})
	}
	_, err := ParseTopology("Ring")
	require.ErrorContains(t, err, `topology "Ring"`)
	var topo Topology
	require.Error(t, json.Unmarshal([]byte(`"fully-connected"`), &topo))
}

func TestAccessText(t *testing.T) {
	access := [][]Access{{AccessYes, AccessNo}, {AccessUnknown, AccessYes}}
	data, err := json.Marshal(access)
	require.NoError(t, err)
	require.JSONEq(t, `[["yes","no"],["unknown","yes"]]`, string(data))
	var back [][]Access
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, access, back)

	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"marshal invalid state", func() error { _, err := json.Marshal(Access(7)); return err }, "invalid access state 7"},
		{"unmarshal unknown word", func() error { var a Access; return json.Unmarshal([]byte(`"maybe"`), &a) }, `access "maybe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, tc.run(), tc.wantErr)
		})
	}
	require.Equal(t, "unknown", Access(7).String())
}
