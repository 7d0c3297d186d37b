package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// Geometry of the chart in SVG user units: two plot areas side by side
// under the title, with the legend underneath both.
const (
	plotWidth   = 1100
	plotLeft    = 80  // left edge of the latency plot area
	plotGap     = 110 // from the latency plot area to the bandwidth one
	plotPanelW  = 440
	plotPanelH  = 320
	plotTop     = 70 // top edge of both plot areas
	plotLegendY = plotTop + plotPanelH + 74
	legendCols  = 4
	legendRowH  = 22
)

// plotPalette is the Okabe–Ito colour-blind-safe palette without black
// (kept for the nccl baseline) and yellow (too faint on white).
var plotPalette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}

// plotSeries is the plottable rows of one (algorithm, placement), by size.
type plotSeries struct {
	name    string
	inPlace bool
	rows    []benchRow
	color   string
	dash    string // stroke-dasharray, "" for a solid line
}

// plotTick is a grid line at a position in axis units; one without a
// label is a minor line.
type plotTick struct {
	at    float64
	label string
}

// plotAxis maps axis units (log2 bytes, log10 µs or GB/s) to a panel side.
type plotAxis struct {
	lo, hi float64
	ticks  []plotTick
}

// frac is where v lies between lo (0) and hi (1).
func (a plotAxis) frac(v float64) float64 { return (v - a.lo) / (a.hi - a.lo) }

// writePlot renders rows as a self-contained SVG chart: latency (µs, log
// scale) and bus bandwidth (GB/s) against message size (log2 scale), one
// line per (algorithm, in-place) series, with a legend and the title on
// top. Skipped rows and rows without a positive time are left out; it is an
// error if nothing is left. The same rows always give the same bytes.
func writePlot(w io.Writer, title string, rows []benchRow) error {
	series := plotSeriesOf(rows)
	if len(series) == 0 {
		return errors.New("no plottable rows (every row skipped or without a time)")
	}
	minB, maxB := math.MaxInt, 0
	minT, maxT, maxBW := math.Inf(1), 0.0, 0.0
	for _, s := range series {
		for _, r := range s.rows {
			minB, maxB = min(minB, r.Bytes), max(maxB, r.Bytes)
			minT, maxT, maxBW = min(minT, r.TimeUS), max(maxT, r.TimeUS), max(maxBW, plotBW(r))
		}
	}
	size, lat, bw := plotSizeAxis(minB, maxB), plotLatencyAxis(minT, maxT), plotBWAxis(maxBW)
	logBytes := func(r benchRow) float64 { return math.Log2(float64(r.Bytes)) }
	rowsN := (len(series) + legendCols - 1) / legendCols
	height := plotLegendY + rowsN*legendRowH + 8

	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", plotEsc(title))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="32" text-anchor="middle" font-size="18" font-weight="bold">%s</text>`+"\n", plotWidth/2, plotEsc(title))
	plotPanel(&b, plotLeft, "Latency", "time per call (µs, log scale)", "µs", size, lat, series, logBytes,
		func(r benchRow) float64 { return math.Log10(r.TimeUS) }, func(r benchRow) float64 { return r.TimeUS })
	plotPanel(&b, plotLeft+plotPanelW+plotGap, "Bus bandwidth", "bus bandwidth (GB/s)", "GB/s", size, bw, series, logBytes,
		plotBW, plotBW)
	colW := float64(plotWidth-2*plotLeft) / legendCols
	for i, s := range series {
		x := float64(plotLeft) + float64(i%legendCols)*colW
		y := float64(plotLegendY + (i/legendCols)*legendRowH)
		fmt.Fprintf(&b, `<g class="legend"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`,
			x, y, x+32, y, s.color, plotDashAttr(s.dash))
		plotMarker(&b, s, x+16, y, "")
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dy="0.35em" font-size="13">%s</text></g>`+"\n", x+40, y, plotEsc(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// plotSeriesOf groups the plottable rows into series sorted by name, each
// sorted by size, and gives each algorithm a colour (the nccl baseline is
// black and dashed; in-place series share their algorithm's colour).
func plotSeriesOf(rows []benchRow) []*plotSeries {
	byName := map[string]*plotSeries{}
	for _, r := range rows {
		if r.Skipped != "" || !(r.TimeUS > 0) || math.IsInf(r.TimeUS, 0) || r.Bytes <= 0 {
			continue
		}
		name := r.Algo
		if r.InPlace {
			name += " (in-place)"
		}
		s := byName[name]
		if s == nil {
			s = &plotSeries{name: name, inPlace: r.InPlace}
			byName[name] = s
		}
		s.rows = append(s.rows, r)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	colors := map[string]string{"nccl": "#000000"}
	out := make([]*plotSeries, 0, len(names))
	for _, n := range names {
		s := byName[n]
		sort.SliceStable(s.rows, func(i, j int) bool { return s.rows[i].Bytes < s.rows[j].Bytes })
		algo := s.rows[0].Algo
		if _, ok := colors[algo]; !ok {
			colors[algo] = plotPalette[(len(colors)-1)%len(plotPalette)]
		}
		s.color = colors[algo]
		if algo == "nccl" {
			s.dash = "7 4"
		}
		out = append(out, s)
	}
	return out
}

// plotPanel draws one plot area with its grid, tick labels, axis titles
// and a polyline per series; x and y give a row's position in axis units,
// raw its value for the hover text.
func plotPanel(b *bytes.Buffer, left float64, heading, yTitle, unit string, xa, ya plotAxis, series []*plotSeries,
	x, y, raw func(benchRow) float64) {
	right, bottom := left+plotPanelW, float64(plotTop+plotPanelH)
	px := func(v float64) float64 { return left + xa.frac(v)*plotPanelW }
	py := func(v float64) float64 { return bottom - ya.frac(v)*plotPanelH }
	fmt.Fprintf(b, `<g class="panel"><rect x="%.1f" y="%d" width="%d" height="%d" fill="#fbfbfb" stroke="#999999"/>`+"\n",
		left, plotTop, plotPanelW, plotPanelH)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", left, plotTop-10, plotEsc(heading))
	for _, t := range xa.ticks {
		plotGrid(b, px(t.at), float64(plotTop), px(t.at), bottom, t.label == "")
		if t.label != "" {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(t.at), bottom+18, plotEsc(t.label))
		}
	}
	for _, t := range ya.ticks {
		plotGrid(b, left, py(t.at), right, py(t.at), t.label == "")
		if t.label != "" {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" dy="0.35em" text-anchor="end">%s</text>`+"\n", left-8, py(t.at), plotEsc(t.label))
		}
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">message size (bytes, log scale)</text>`+"\n", left+plotPanelW/2, bottom+42)
	cy := float64(plotTop) + plotPanelH/2
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		left-52, cy, left-52, cy, plotEsc(yTitle))
	for _, s := range series {
		fmt.Fprintf(b, `<g class="series" data-series="%s"><polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s points="`,
			plotEsc(s.name), s.color, plotDashAttr(s.dash))
		for i, r := range s.rows {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(b, "%.1f,%.1f", px(x(r)), py(y(r)))
		}
		b.WriteString(`"/>`)
		for _, r := range s.rows {
			plotMarker(b, s, px(x(r)), py(y(r)), fmt.Sprintf("%s, %s: %.4g %s", s.name, plotSizeLabel(math.Log2(float64(r.Bytes))), raw(r), unit))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</g>\n")
}

// plotGrid draws one grid line, fainter for a minor tick.
func plotGrid(b *bytes.Buffer, x1, y1, x2, y2 float64, minor bool) {
	color := "#d8d8d8"
	if minor {
		color = "#eeeeee"
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x1, y1, x2, y2, color)
}

// plotMarker draws a point: filled, or hollow for an in-place series, with
// hover text when tip is not empty.
func plotMarker(b *bytes.Buffer, s *plotSeries, x, y float64, tip string) {
	fill := s.color
	if s.inPlace {
		fill = "#ffffff"
	}
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="%s" stroke-width="1.5">`, x, y, fill, s.color)
	if tip != "" {
		fmt.Fprintf(b, `<title>%s</title>`, plotEsc(tip))
	}
	b.WriteString(`</circle>`)
}

// plotSizeAxis covers lo to hi bytes in whole powers of two with half a
// step of margin, labelling at most about ten of them.
func plotSizeAxis(lo, hi int) plotAxis {
	a, z := math.Floor(math.Log2(float64(lo))), math.Ceil(math.Log2(float64(hi)))
	step := 1.0
	for (z-a)/step > 10 {
		step *= 2
	}
	ax := plotAxis{lo: a - 0.5, hi: z + 0.5}
	for e := a; e <= z; e++ {
		t := plotTick{at: e}
		if math.Mod(e, step) == 0 {
			t.label = plotSizeLabel(e)
		}
		ax.ticks = append(ax.ticks, t)
	}
	return ax
}

// plotSizeLabel writes 2^e bytes as 512, 1K, 64K, 1M, 256M, 2G.
func plotSizeLabel(e float64) string {
	v := math.Exp2(e)
	for _, u := range []struct {
		n float64
		s string
	}{{1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
		if v >= u.n {
			return strconv.FormatFloat(v/u.n, 'f', -1, 64) + u.s
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// plotLatencyAxis covers lo to hi µs in whole decades (in log10 units),
// with a minor line at 2 to 9 times each, and labels 2 and 5 times each
// too when there are only one or two decades.
func plotLatencyAxis(lo, hi float64) plotAxis {
	a, z := math.Floor(math.Log10(lo*0.9)), math.Ceil(math.Log10(hi*1.1))
	ax := plotAxis{lo: a, hi: z}
	for k := a; k <= z; k++ {
		for m := 1.0; m < 10 && (m == 1 || k < z && z-a <= 6); m++ {
			t := plotTick{at: k + math.Log10(m)}
			if m == 1 || z-a <= 2 && (m == 2 || m == 5) {
				t.label = strconv.FormatFloat(m*math.Pow10(int(k)), 'g', -1, 64)
			}
			ax.ticks = append(ax.ticks, t)
		}
	}
	return ax
}

// plotBWAxis runs from zero to a round number above hi GB/s in about five
// round steps.
func plotBWAxis(hi float64) plotAxis {
	if !(hi > 0) {
		hi = 1
	}
	raw := hi * 1.05 / 5
	p := math.Pow10(int(math.Floor(math.Log10(raw))))
	step := 10 * p
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	n := math.Ceil(hi * 1.05 / step)
	ax := plotAxis{lo: 0, hi: n * step}
	for i := 0.0; i <= n; i++ {
		v := math.Round(i*step*1e6) / 1e6
		ax.ticks = append(ax.ticks, plotTick{at: v, label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ax
}

// plotBW is a row's bus bandwidth, or zero where it is not a finite
// non-negative number.
func plotBW(r benchRow) float64 {
	if !(r.BusBW >= 0) || math.IsInf(r.BusBW, 0) {
		return 0
	}
	return r.BusBW
}

// plotDashAttr is the stroke-dasharray attribute for dash, if any.
func plotDashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return ` stroke-dasharray="` + dash + `"`
}

// plotEsc escapes s for SVG text and attribute values.
func plotEsc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
