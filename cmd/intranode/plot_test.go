package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// plotDoc is what the tests read back from a chart.
type plotDoc struct {
	polylines []map[string]string // attributes of each <polyline>
	series    []string            // data-series of each series group, in order
	text      string              // all character data
}

// parsePlot walks every token of an SVG chart, failing on malformed XML.
func parsePlot(t *testing.T, svg []byte) plotDoc {
	t.Helper()
	var doc plotDoc
	var text strings.Builder
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range tok.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if tok.Name.Local == "polyline" {
				doc.polylines = append(doc.polylines, attrs)
			}
			if s, ok := attrs["data-series"]; ok {
				doc.series = append(doc.series, s)
			}
		case xml.CharData:
			text.Write(tok)
		}
	}
	doc.text = text.String()
	return doc
}

func renderPlot(t *testing.T, title string, rows []benchRow) (string, plotDoc) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, writePlot(&b, title, rows))
	return b.String(), parsePlot(t, b.Bytes())
}

func samplePlotRows() []benchRow {
	var rows []benchRow
	for i, n := range []int{1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20} {
		us := 8 * float64(i+1) * float64(i+1)
		bw := float64(n) / us / 1e3
		rows = append(rows,
			benchRow{Bytes: n, Algo: "oneshot", TimeUS: us, BusBW: bw},
			benchRow{Bytes: n, Algo: "oneshot", InPlace: true, TimeUS: us * 1.1, BusBW: bw / 1.1},
			benchRow{Bytes: n, Algo: "nccl", TimeUS: us * 1.3, BusBW: bw / 1.3},
			benchRow{Bytes: n, Algo: "hcm", Skipped: "not a hybrid cube mesh"},
		)
		tw := benchRow{Bytes: n, Algo: "twoshot", TimeUS: us * 0.9, BusBW: bw / 0.9}
		switch i {
		case 1:
			tw.Skipped, tw.TimeUS, tw.BusBW = "buffer too small", 0, 0
		case 3:
			tw.TimeUS, tw.BusBW = 0, 0
		}
		rows = append(rows, tw)
	}
	return rows
}

func TestWritePlot(t *testing.T) {
	title := `all-reduce <bf16> & "friends"`
	svg, doc := renderPlot(t, title, samplePlotRows())
	want := []string{"nccl", "oneshot", "oneshot (in-place)", "twoshot"}
	// Two panels, one polyline per series in each, in sorted order.
	require.Len(t, doc.polylines, 2*len(want))
	require.Equal(t, append(append([]string{}, want...), want...), doc.series)
	for _, name := range want {
		require.Contains(t, doc.text, name)
	}
	require.NotContains(t, doc.text, "hcm")
	require.Contains(t, doc.text, title)
	require.NotContains(t, svg, "<bf16>")
	for _, label := range []string{"1K", "64K", "1M", "256M", "GB/s", "µs"} {
		require.Contains(t, doc.text, label)
	}
	for i, name := range doc.series {
		p := doc.polylines[i]
		if name == "nccl" {
			require.Equal(t, "#000000", p["stroke"])
			require.NotEmpty(t, p["stroke-dasharray"])
		} else {
			require.NotEqual(t, "#000000", p["stroke"])
			require.Empty(t, p["stroke-dasharray"])
		}
	}
	// twoshot lost its skipped row and its row without a time.
	require.Len(t, strings.Fields(doc.polylines[3]["points"]), 3)
	require.Len(t, strings.Fields(doc.polylines[1]["points"]), 5)
	// In-place shares its algorithm's colour.
	require.Equal(t, doc.polylines[1]["stroke"], doc.polylines[2]["stroke"])
}

func TestWritePlotDeterministic(t *testing.T) {
	rows := samplePlotRows()
	a, _ := renderPlot(t, "t", rows)
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	b, _ := renderPlot(t, "t", rows)
	require.Equal(t, a, b)
}

func TestWritePlotSinglePoint(t *testing.T) {
	_, doc := renderPlot(t, "one", []benchRow{{Bytes: 4096, Algo: "auto", TimeUS: 12.5, BusBW: 0.3}})
	require.Len(t, doc.polylines, 2)
	require.Equal(t, []string{"auto", "auto"}, doc.series)
	require.Len(t, strings.Fields(doc.polylines[0]["points"]), 1)
	require.Contains(t, doc.text, "4K")
	require.NotContains(t, doc.text, "NaN")
	require.NotContains(t, doc.text, "Inf")
}

func TestWritePlotNothingToPlot(t *testing.T) {
	for _, rows := range [][]benchRow{
		nil,
		{{Bytes: 1024, Algo: "hcm", Skipped: "not a hybrid cube mesh"}},
		{{Bytes: 1024, Algo: "oneshot", TimeUS: 0}},
	} {
		var b bytes.Buffer
		require.Error(t, writePlot(&b, "empty", rows))
		require.Zero(t, b.Len())
	}
}
