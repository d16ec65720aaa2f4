package visualizer

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// Chart geometry, in SVG user units; the SVG scales to its container.
const (
	chartW, chartH         = 600.0, 220.0
	padL, padR, padT, padB = 44.0, 12.0, 12.0, 28.0
)

type series struct {
	name, class string
	ys          []float64
}

// progressChart draws job progress and time progress (0–100 %) against time.
func progressChart(ps []*schemas.Progress, deadline *time.Time) string {
	jp := series{name: "job progress", class: "s-job"}
	tp := series{name: "time progress", class: "s-time"}
	for _, p := range ps {
		jp.ys = append(jp.ys, 100*p.JobProgress)
		tp.ys = append(tp.ys, min(100, 100*p.TimeProgress))
	}
	title := "Job progress vs time progress (%)"
	if deadline != nil {
		title += ", deadline " + deadline.UTC().Format("15:04:05")
	}
	return chart(title, "progress-chart", ps, 100, []series{jp, tp})
}

// replicasChart draws replicas (and replicas needed, when known) against time.
func replicasChart(ps []*schemas.Progress) string {
	r := series{name: "replicas", class: "s-replicas"}
	need := series{name: "replicas needed", class: "s-needed"}
	top := 1.0
	for _, p := range ps {
		r.ys = append(r.ys, float64(p.Replicas))
		need.ys = append(need.ys, float64(p.ReplicasNeeded))
		top = max(top, float64(p.Replicas), float64(p.ReplicasNeeded))
	}
	return chart("Replicas over time", "replicas-chart", ps, 4*math.Ceil((top+1)/4), []series{r, need}) // whole-number ticks
}

func chart(title, id string, ps []*schemas.Progress, top float64, ss []series) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" id="%s" class="chart" viewBox="0 0 %g %g" role="img" aria-labelledby="%s-t" data-points="%d">`,
		id, chartW, chartH, id, len(ps))
	fmt.Fprintf(&b, `<title id="%s-t">%s</title>`, id, html.EscapeString(title))
	x0, x1, y0, y1 := padL, chartW-padR, chartH-padB, padT
	for i := 0; i <= 4; i++ { // horizontal grid and y labels
		y := y0 + (y1-y0)*float64(i)/4
		fmt.Fprintf(&b, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`, x0, y, x1, y)
		fmt.Fprintf(&b, `<text class="axis" x="%g" y="%.1f" text-anchor="end">%g</text>`, x0-4, y+4, roundTo(top*float64(i)/4))
	}
	if len(ps) == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%g" y="%g" text-anchor="middle">no samples yet</text></svg>`, chartW/2, chartH/2)
		return b.String()
	}
	t0, t1 := ps[0].At, ps[len(ps)-1].At
	span := t1.Sub(t0).Seconds()
	xOf := func(i int) float64 {
		if span <= 0 {
			return x0 + (x1-x0)*float64(i)/float64(max(1, len(ps)-1))
		}
		return x0 + (x1-x0)*ps[i].At.Sub(t0).Seconds()/span
	}
	fmt.Fprintf(&b, `<text class="axis" x="%g" y="%g">%s</text>`, x0, chartH-8, t0.UTC().Format("15:04:05"))
	fmt.Fprintf(&b, `<text class="axis" x="%g" y="%g" text-anchor="end">%s</text>`, x1, chartH-8, t1.UTC().Format("15:04:05"))
	for k, s := range ss {
		b.WriteString(`<polyline class="` + s.class + `" fill="none" points="`)
		for i, v := range s.ys {
			fmt.Fprintf(&b, "%.1f,%.1f ", xOf(i), y0+(y1-y0)*min(v, top)/top)
		}
		b.WriteString(`"/>`)
		lx := x0 + 8 + float64(k)*150
		fmt.Fprintf(&b, `<rect class="%s key" x="%g" y="%g" width="10" height="10"/><text class="legend" x="%g" y="%g">%s</text>`,
			s.class, lx, padT+2, lx+14, padT+11, html.EscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func roundTo(v float64) float64 {
	if v >= 10 {
		return float64(int(v + 0.5))
	}
	return float64(int(v*10+0.5)) / 10
}
