package connectivity

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// TableOptions adjusts WriteTable.
type TableOptions struct {
	// Labels names the devices, one per row and column. The default is
	// "GPU0", "GPU1"…
	Labels []string
	// Columns are printed after the link cells, as nvidia-smi prints CPU
	// affinity: a "PCI Bus" column, a device name…
	Columns []Column
	// NoLegend leaves out the legend block.
	NoLegend bool
}

// Column is an extra column of a table: a header and one value per device.
type Column struct {
	// Header heads the column.
	Header string
	// Values holds one cell per device, in device order.
	Values []string
}

// WriteTable prints m in the layout of `nvidia-smi topo -m`: a header row of
// device labels, one row per device with "X" on the diagonal, a cell per
// pair (NV<n> for NVLink, XGMI or XGMI<n> for xGMI, L<n> for the fake's
// emulated links, SYS where there is no link), the extra columns of opts,
// and a legend explaining the cells. Nothing is written when m or opts are
// invalid.
func WriteTable(w io.Writer, m Matrix, opts TableOptions) error {
	if err := m.Validate(); err != nil {
		return err
	}
	n := m.Size()
	labels, err := tableLabels(n, opts.Labels)
	if err != nil {
		return err
	}
	for _, c := range opts.Columns {
		if len(c.Values) != n {
			return fmt.Errorf("connectivity: column %q has %d values, want %d", c.Header, len(c.Values), n)
		}
		if err := checkCells(append([]string{c.Header}, c.Values...)); err != nil {
			return err
		}
	}
	rows := make([][]string, 0, n+1)
	header := append([]string{""}, labels...)
	for _, c := range opts.Columns {
		header = append(header, c.Header)
	}
	rows = append(rows, header)
	for i := range n {
		row := append(make([]string, 0, 1+n+len(opts.Columns)), labels[i])
		for j := range n {
			row = append(row, linkCell(m.Kind, i, j, m.At(i, j)))
		}
		for _, c := range opts.Columns {
			row = append(row, c.Values[i])
		}
		rows = append(rows, row)
	}
	var legend []string
	if !opts.NoLegend {
		legend = append([]string{
			legendLine("X", "Self"),
			legendLine("SYS", "No direct link: traffic crosses PCIe and the CPU interconnect"),
		}, linkLegend(m.Kind)...)
	}
	return writeGrid(w, rows, legend)
}

// WritePeerTable prints a peer-access matrix (PeerCache.Snapshot) in the
// layout of WriteTable: OK where row i can access column j, NS where it
// cannot, ? where nobody has asked yet, X on the diagonal.
func WritePeerTable(w io.Writer, access [][]Access) error {
	n := len(access)
	for i, row := range access {
		if len(row) != n {
			return fmt.Errorf("connectivity: access row %d has %d entries, want %d", i, len(row), n)
		}
	}
	labels := defaultLabels(n)
	rows := make([][]string, 0, n+1)
	rows = append(rows, append([]string{""}, labels...))
	for i := range n {
		row := append(make([]string, 0, n+1), labels[i])
		for j := range n {
			row = append(row, accessCell(i, j, access[i][j]))
		}
		rows = append(rows, row)
	}
	legend := []string{
		legendLine("X", "Self"),
		legendLine("OK", "Peer access works"),
		legendLine("NS", "Peer access not supported"),
		legendLine("?", "Not queried yet"),
	}
	return writeGrid(w, rows, legend)
}

func linkCell(kind LinkKind, i, j, n int) string {
	switch {
	case i == j:
		return "X"
	case n == 0:
		return "SYS"
	}
	switch kind {
	case LinkNVLink:
		return "NV" + strconv.Itoa(n)
	case LinkXGMI:
		if n == 1 {
			return "XGMI"
		}
		return "XGMI" + strconv.Itoa(n)
	default:
		return "L" + strconv.Itoa(n)
	}
}

func linkLegend(kind LinkKind) []string {
	switch kind {
	case LinkNVLink:
		return []string{legendLine("NV#", "Connection traversing a bonded set of # NVLinks")}
	case LinkXGMI:
		return []string{
			legendLine("XGMI", "Peer-to-peer accessible over xGMI"),
			legendLine("XGMI#", "Connection over # xGMI links"),
		}
	case LinkShared:
		return []string{legendLine("L#", "Connection through # emulated links (fake backend)")}
	default:
		return []string{legendLine("L#", fmt.Sprintf("Connection through # links of kind %q", kind))}
	}
}

func accessCell(i, j int, a Access) string {
	switch {
	case i == j:
		return "X"
	case a == AccessYes:
		return "OK"
	case a == AccessNo:
		return "NS"
	default:
		return "?"
	}
}

func legendLine(cell, meaning string) string {
	return fmt.Sprintf("  %-5s = %s", cell, meaning)
}

func defaultLabels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "GPU" + strconv.Itoa(i)
	}
	return out
}

func tableLabels(n int, labels []string) ([]string, error) {
	if len(labels) == 0 {
		return defaultLabels(n), nil
	}
	if len(labels) != n {
		return nil, fmt.Errorf("connectivity: %d labels for %d devices", len(labels), n)
	}
	if err := checkCells(labels); err != nil {
		return nil, err
	}
	return labels, nil
}

// checkCells rejects text that would break the grid's alignment.
func checkCells(cells []string) error {
	for _, c := range cells {
		if strings.ContainsAny(c, "\t\n\r\v\f") {
			return fmt.Errorf("connectivity: table cell %q contains a tab or line break", c)
		}
	}
	return nil
}

// writeGrid aligns rows into columns two spaces apart and writes them, then
// the legend under a "Legend:" heading, to w in a single Write.
func writeGrid(w io.Writer, rows [][]string, legend []string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush() // into a bytes.Buffer, which cannot fail
	if len(legend) > 0 {
		buf.WriteString("\nLegend:\n\n")
		for _, l := range legend {
			buf.WriteString(l)
			buf.WriteByte('\n')
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("connectivity: writing table: %w", err)
	}
	return nil
}
