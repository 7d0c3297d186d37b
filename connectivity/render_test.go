package connectivity

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteTable(t *testing.T) {
	xgmi := fromRows(LinkXGMI, [][]int{{0, 1, 0}, {1, 0, 2}, {0, 2, 0}})
	fake := fromRows(LinkShared, [][]int{{0, 1}, {3, 0}})
	odd := fromRows(LinkKind("pcie"), [][]int{{0, 2}, {2, 0}})
	tests := []struct {
		name string
		m    Matrix
		opts TableOptions
		want string
	}{
		{
			name: "2xH200 with a PCI bus column",
			m:    nvswitch(2, 18),
			opts: TableOptions{Columns: []Column{{Header: "PCI Bus", Values: []string{"0000:18:00.0", "0000:2A:00.0"}}}},
			want: `      GPU0  GPU1  PCI Bus
GPU0  X     NV18  0000:18:00.0
GPU1  NV18  X     0000:2A:00.0

Legend:

  X     = Self
  SYS   = No direct link: traffic crosses PCIe and the CPU interconnect
  NV#   = Connection traversing a bonded set of # NVLinks
`,
		},
		{
			name: "xGMI with labels",
			m:    xgmi,
			opts: TableOptions{Labels: []string{"gpu-a", "gpu-b", "gpu-c"}},
			want: `       gpu-a  gpu-b  gpu-c
gpu-a  X      XGMI   SYS
gpu-b  XGMI   X      XGMI2
gpu-c  SYS    XGMI2  X

Legend:

  X     = Self
  SYS   = No direct link: traffic crosses PCIe and the CPU interconnect
  XGMI  = Peer-to-peer accessible over xGMI
  XGMI# = Connection over # xGMI links
`,
		},
		{
			name: "fake links, asymmetric, two columns, no legend",
			m:    fake,
			opts: TableOptions{NoLegend: true, Columns: []Column{
				{Header: "Name", Values: []string{"fake 0", "fake 1"}},
				{Header: "NUMA", Values: []string{"0", "1"}},
			}},
			want: `      GPU0  GPU1  Name    NUMA
GPU0  X     L1    fake 0  0
GPU1  L3    X     fake 1  1
`,
		},
		{
			name: "fake links legend",
			m:    fromRows(LinkShared, [][]int{{0, 1}, {1, 0}}),
			opts: TableOptions{Labels: []string{"fake0", "fake1"}},
			want: `       fake0  fake1
fake0  X      L1
fake1  L1     X

Legend:

  X     = Self
  SYS   = No direct link: traffic crosses PCIe and the CPU interconnect
  L#    = Connection through # emulated links (fake backend)
`,
		},
		{
			name: "kind the renderer does not know",
			m:    odd,
			want: `      GPU0  GPU1
GPU0  X     L2
GPU1  L2    X

Legend:

  X     = Self
  SYS   = No direct link: traffic crosses PCIe and the CPU interconnect
  L#    = Connection through # links of kind "pcie"
`,
		},
		{
			name: "DGX-1 rows",
			m:    dgx1(),
			opts: TableOptions{NoLegend: true},
			want: `      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7
GPU0  X     NV1   NV1   NV2   NV2   SYS   SYS   SYS
GPU1  NV1   X     NV2   NV1   SYS   NV2   SYS   SYS
GPU2  NV1   NV2   X     NV2   SYS   SYS   NV1   SYS
GPU3  NV2   NV1   NV2   X     SYS   SYS   SYS   NV1
GPU4  NV2   SYS   SYS   SYS   X     NV1   NV1   NV2
GPU5  SYS   NV2   SYS   SYS   NV1   X     NV2   NV1
GPU6  SYS   SYS   NV1   SYS   NV1   NV2   X     NV2
GPU7  SYS   SYS   SYS   NV1   NV2   NV1   NV2   X
`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			require.NoError(t, WriteTable(&sb, tc.m, tc.opts))
			require.Equal(t, tc.want, sb.String())
		})
	}
}

func TestWriteTableErrors(t *testing.T) {
	tests := []struct {
		name    string
		m       Matrix
		opts    TableOptions
		wantErr string
	}{
		{"invalid matrix", Matrix{Links: [][]int{{0, 1}, {1}}}, TableOptions{}, "row 1 has 1 entries"},
		{"too few labels", nvswitch(2, 1), TableOptions{Labels: []string{"a"}}, "1 labels for 2 devices"},
		{"column too short", nvswitch(2, 1), TableOptions{Columns: []Column{{Header: "Bus", Values: []string{"x"}}}}, `column "Bus" has 1 values, want 2`},
		{"tab in a label", nvswitch(2, 1), TableOptions{Labels: []string{"a\tb", "c"}}, "tab or line break"},
		{"newline in a value", nvswitch(2, 1), TableOptions{Columns: []Column{{Header: "Bus", Values: []string{"x", "y\nz"}}}}, "tab or line break"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			require.ErrorContains(t, WriteTable(&sb, tc.m, tc.opts), tc.wantErr)
			require.Empty(t, sb.String(), "nothing written on a bad argument")
		})
	}
}

func TestWritePeerTable(t *testing.T) {
	tests := []struct {
		name   string
		access [][]Access
		want   string
	}{
		{
			name: "three devices, every state",
			access: [][]Access{
				{AccessYes, AccessNo, AccessUnknown},
				{AccessYes, AccessYes, AccessYes},
				{AccessNo, AccessNo, AccessUnknown},
			},
			want: `      GPU0  GPU1  GPU2
GPU0  X     NS    ?
GPU1  OK    X     OK
GPU2  NS    NS    X

Legend:

  X     = Self
  OK    = Peer access works
  NS    = Peer access not supported
  ?     = Not queried yet
`,
		},
		{
			name:   "one device",
			access: [][]Access{{AccessYes}},
			want: `      GPU0
GPU0  X

Legend:

  X     = Self
  OK    = Peer access works
  NS    = Peer access not supported
  ?     = Not queried yet
`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			require.NoError(t, WritePeerTable(&sb, tc.access))
			require.Equal(t, tc.want, sb.String())
		})
	}
}

func TestWritePeerTableFromCache(t *testing.T) {
	c := NewPeerCache(2, func(i, j int) (bool, error) { return i == 0, nil }, nil)
	_, err := c.Get(0, 1)
	require.NoError(t, err)
	var sb strings.Builder
	require.NoError(t, WritePeerTable(&sb, c.Snapshot()))
	require.True(t, strings.HasPrefix(sb.String(), "      GPU0  GPU1\nGPU0  X     OK\nGPU1  ?     X\n"), sb.String())
}

func TestWritePeerTableRagged(t *testing.T) {
	var sb strings.Builder
	err := WritePeerTable(&sb, [][]Access{{AccessYes, AccessYes}, {AccessYes}})
	require.ErrorContains(t, err, "access row 1 has 1 entries, want 2")
	require.Empty(t, sb.String())
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriteTablePropagatesWriteErrors(t *testing.T) {
	errDisk := errors.New("disk full")
	tests := []struct {
		name  string
		write func() error
	}{
		{"link table", func() error { return WriteTable(failingWriter{errDisk}, dgx1(), TableOptions{}) }},
		{"peer table", func() error { return WritePeerTable(failingWriter{errDisk}, [][]Access{{AccessYes}}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.write(), errDisk)
		})
	}
}
