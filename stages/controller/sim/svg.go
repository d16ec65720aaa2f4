package sim

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/pace-platform/pace/schemas"
)

// palette colours the controllers in plot order.
var palette = []string{"#d62728", "#9467bd", "#1f77b4", "#2ca02c", "#ff7f0e", "#8c564b"}

// panel is one chart: axes, lines and labels.
type panel struct {
	title, xlabel, ylabel string
	xmax, ymax            float64
	lines                 []line
	x0                    float64 // left offset in the SVG
}

type line struct {
	name   string
	colour string
	dash   bool
	pts    [][2]float64
}

const (
	panelW, panelH = 420.0, 260.0
	padL, padB     = 50.0, 40.0
	padT, padR     = 30.0, 15.0
)

func (p panel) write(w io.Writer) {
	pw, ph := panelW-padL-padR, panelH-padT-padB
	sx := func(x float64) float64 { return p.x0 + padL + x/p.xmax*pw }
	sy := func(y float64) float64 { return padT + ph - y/p.ymax*ph }
	fmt.Fprintf(w, `<text x="%.1f" y="18" font-size="13" text-anchor="middle">%s</text>`+"\n", p.x0+padL+pw/2, esc(p.title))
	fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", sx(0), sy(p.ymax), pw, ph)
	for i := 0; i <= 4; i++ {
		x, y := p.xmax*float64(i)/4, p.ymax*float64(i)/4
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>`+"\n", sx(x), sy(0)+14, tick(x))
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>`+"\n", sx(0)-4, sy(y)+3, tick(y))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", p.x0+padL+pw/2, panelH-6, esc(p.xlabel))
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		p.x0+12, padT+ph/2, p.x0+12, padT+ph/2, esc(p.ylabel))
	for i, l := range p.lines {
		if len(l.pts) == 0 {
			continue
		}
		var b strings.Builder
		for j, pt := range l.pts {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", sx(math.Min(pt[0], p.xmax)), sy(math.Min(pt[1], p.ymax)))
		}
		dash := ""
		if l.dash {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", l.colour, dash, b.String())
		if l.name != "" {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>`+"\n", sx(0)+6, sy(p.ymax)+12+12*float64(i), l.colour, esc(l.name))
		}
	}
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func writeSVG(w io.Writer, panels ...panel) {
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif">`+"\n", panelW*float64(len(panels)), panelH)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, p := range panels {
		p.x0 = panelW * float64(i)
		p.write(w)
	}
	fmt.Fprintln(w, "</svg>")
}

// PlotScenario writes an SVG of one scenario run by several controllers:
// job progress against time progress (batch) or queue length over time
// (streaming), and replicas over time.
func PlotScenario(w io.Writer, sr ScenarioReport, names []string) {
	left := panel{title: sr.Name + ": progress vs time progress", xlabel: "time progress", ylabel: "job progress", xmax: 1, ymax: 1}
	right := panel{title: sr.Name + ": replicas", xlabel: "time (s)", ylabel: "live replicas", ymax: 1}
	if sr.Mode == schemas.Streaming {
		left = panel{title: sr.Name + ": queue", xlabel: "time (s)", ylabel: "queued items", ymax: 1}
	} else {
		left.lines = append(left.lines, line{colour: "#999", dash: true, pts: [][2]float64{{0, 0}, {1, 1}}})
	}
	for i, name := range names {
		r := sr.Results[name]
		c := palette[i%len(palette)]
		var lp, rp [][2]float64
		for _, pt := range r.Series {
			right.xmax = math.Max(right.xmax, pt.T)
			right.ymax = math.Max(right.ymax, float64(pt.Replicas))
			rp = append(rp, [2]float64{pt.T, float64(pt.Replicas)})
			if sr.Mode == schemas.Streaming {
				left.xmax = math.Max(left.xmax, pt.T)
				left.ymax = math.Max(left.ymax, float64(pt.Queue))
				lp = append(lp, [2]float64{pt.T, float64(pt.Queue)})
			} else {
				left.xmax = math.Max(left.xmax, pt.TimeProgress)
				lp = append(lp, [2]float64{pt.TimeProgress, pt.JobProgress})
			}
		}
		left.lines = append(left.lines, line{name: name, colour: c, pts: lp})
		right.lines = append(right.lines, line{name: name, colour: c, pts: rp})
	}
	left.xmax, right.xmax = niceMax(left.xmax), niceMax(right.xmax)
	right.ymax = niceMax(right.ymax + 1)
	if sr.Mode == schemas.Streaming {
		left.ymax = niceMax(left.ymax)
	}
	writeSVG(w, left, right)
}

// PlotCalibration writes an SVG of a step experiment: time to finish against
// replicas, simulated and measured.
func PlotCalibration(w io.Writer, sr ScenarioReport) {
	p := panel{title: sr.Name + ": time to finish vs replicas", xlabel: "replicas", ylabel: "time to finish (s)"}
	var sim, meas [][2]float64
	for _, c := range sr.Calibration {
		p.xmax = math.Max(p.xmax, float64(c.Replicas))
		p.ymax = math.Max(p.ymax, math.Max(c.Simulated, c.Measured))
		sim = append(sim, [2]float64{float64(c.Replicas), c.Simulated})
		if c.Measured > 0 {
			meas = append(meas, [2]float64{float64(c.Replicas), c.Measured})
		}
	}
	p.xmax, p.ymax = niceMax(p.xmax), niceMax(p.ymax)
	p.lines = []line{{name: "simulated", colour: palette[3], pts: sim}, {name: "measured (Asperathos, real cluster)", colour: palette[0], dash: true, pts: meas}}
	writeSVG(w, p)
}

// niceMax rounds x up to 1, 2 or 5 times a power of ten.
func niceMax(x float64) float64 {
	if x <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if x <= m*e {
			return m * e
		}
	}
	return 10 * e
}
