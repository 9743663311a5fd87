package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// series are the bars drawn per system, in order.
var series = []struct {
	w     workload
	conc  int
	color string
}{
	{w1Chain, 1, "#9ecae1"}, {w1Chain, 8, "#4292c6"}, {w1Chain, 64, "#08519c"},
	{w2FanOut, 8, "#74c476"}, {w3Events, 8, "#fd8d3c"},
}

// renderSVG draws workflows/s (log scale) per system as grouped horizontal
// bars, with the disk's limit for W1 as a dashed line.
func renderSVG(s *summary) string {
	type group struct{ key, label string }
	var groups []group
	seen := map[string]bool{}
	for _, r := range s.Rows {
		if r.Workload == string(wLimit) || seen[r.Key] {
			continue
		}
		seen[r.Key] = true
		groups = append(groups, group{r.Key, r.System + " · " + r.Storage})
	}
	const left, width, barH, top = 260, 560, 7, 56
	groupH := barH*len(series) + 10
	height := top + groupH*len(groups) + 60
	lo, hi := 1.0, 1e4
	x := func(v float64) float64 {
		v = math.Max(lo, math.Min(hi, v))
		return left + width*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", left+width+40, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="10" y="16" font-size="14" font-weight="bold">Workflows per second (log scale), median of %d runs</text>`+"\n", s.Runs)
	p(`<text x="10" y="30" font-size="10">%s</text>`+"\n", html.EscapeString(s.Machine))
	for v := lo; v <= hi*1.001; v *= 10 {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, x(v), top-5, x(v), height-45)
		p(`<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(v), height-32, v)
	}
	if f := s.fsyncRate(); !math.IsNaN(f) {
		lim := f / chainSteps
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="red" stroke-dasharray="4,3"/>`, x(lim), top-5, x(lim), height-45)
		p(`<text x="%.1f" y="%d" fill="red">disk limit for W1 unbatched: fsync/s ÷ %d = %.0f</text>`+"\n", x(lim)+3, top-8, chainSteps, lim)
	}
	for gi, g := range groups {
		y0 := top + gi*groupH
		p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, y0+groupH/2, html.EscapeString(g.label))
		for si, se := range series {
			r := s.find(g.key, se.w, se.conc)
			if r == nil {
				continue
			}
			y := y0 + si*barH
			p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, left, y, x(r.WFps.Med)-left, barH-1, se.color)
			p(`<text x="%.1f" y="%d" font-size="8">%s</text>`+"\n", x(r.WFps.Med)+2, y+barH-1, num(r.WFps.Med, 1))
		}
	}
	for si, se := range series {
		lx := 10 + si*150
		p(`<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s c=%d</text>`+"\n",
			lx, height-20, se.color, lx+14, height-11, se.w, se.conc)
	}
	p("</svg>\n")
	return b.String()
}
