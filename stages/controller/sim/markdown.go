package sim

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/template"

	"github.com/pace-platform/pace/schemas"
)

//go:embed controllers.md.tmpl
var controllersMD string

// controllersDoc is docs/controllers.md's text around the figures Markdown computes.
var controllersDoc = template.Must(template.New("controllers.md").Parse(controllersMD))

// docView is what controllersDoc shows: table rows, ready to print, and the scenarios.
type docView struct {
	Headline, PerScenario, Gaps, Tunings []string
	Scenarios, Calibrations              []ScenarioReport
	ImgDir                               string
}

// Markdown writes the comparison as docs/controllers.md; plots are linked
// as imgDir/<scenario>.svg (written by the caller with PlotScenario).
func Markdown(w io.Writer, rep Report, names []string, imgDir string) error {
	v := docView{Scenarios: rep.Scenarios, ImgDir: imgDir}
	for _, n := range names {
		s := rep.Controllers[n]
		streaming := fmt.Sprintf("%.0f %%", 100*s.StreamingLatencyMet)
		if batchOnly(n) {
			streaming = "—"
		}
		v.Headline = append(v.Headline, fmt.Sprintf("| `%s` | %.0f %% | %.3f | %.1f | %s |",
			n, 100*s.FeasibleDeadlinesMet, s.CostVsOracle, s.ScalingActions, streaming))
	}
	v.PerScenario = append(v.PerScenario, fmt.Sprintf("| scenario | oracle (replica-s) | %s |", strings.Join(quote(names), " | ")),
		"|---|---|"+strings.Repeat("---|", len(names)))
	for _, sr := range rep.Scenarios {
		cells := []string{"`" + sr.Name + "`", "—"}
		if sr.Mode == schemas.Batch {
			cells[1] = fmt.Sprintf("%.1f", sr.Oracle)
			if !sr.Feasible {
				cells[1] += " (infeasible)"
			}
		}
		for _, n := range names {
			r, ok := sr.Results[n]
			if !ok {
				cells = append(cells, "—")
				continue
			}
			cells = append(cells, cell(sr.Mode, r))
		}
		v.PerScenario = append(v.PerScenario, "| "+strings.Join(cells, " | ")+" |")
		tuned, hasTuned := sr.Results[Tuned]
		if hasTuned {
			row := fmt.Sprintf("- `%s`: `%s`", sr.Name, tuned.Tuning)
			if tuned.Forecast {
				row += ", with the forecast of the training draws"
			}
			v.Tunings = append(v.Tunings, row)
		}
		if r, ok := sr.Results["deadline"]; ok && sr.Mode == schemas.Batch && sr.Feasible && r.CostVsOracle > 1.10 {
			row := fmt.Sprintf("- `%s`: %.2f×", sr.Name, r.CostVsOracle)
			if hasTuned {
				row += fmt.Sprintf(" (the tuned yardstick: %.2f×)", tuned.CostVsOracle)
			}
			v.Gaps = append(v.Gaps, row)
		}
		if len(sr.Calibration) > 0 {
			v.Calibrations = append(v.Calibrations, sr)
		}
	}
	return controllersDoc.Execute(w, v)
}

// cell is one controller's result in the per-scenario table.
func cell(mode schemas.JobMode, r Result) string {
	mark := "✓"
	if !r.Met {
		mark = fmt.Sprintf("✗ +%.1fs", r.Lateness)
	}
	if mode == schemas.Streaming {
		return fmt.Sprintf("%s p99 %.1fs, %.0f rs, %d", mark, r.LatencyP99, r.ReplicaSeconds, r.ScalingActions)
	}
	return fmt.Sprintf("%s %.2f×, %d", mark, r.CostVsOracle, r.ScalingActions)
}

func quote(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return out
}

// Docs renders docs/controllers.md and its plots from a report whose results
// keep their series: file names relative to the docs directory → contents.
func Docs(rep Report, names []string) (map[string][]byte, error) {
	files := map[string][]byte{}
	plotted := slices.DeleteFunc(slices.Clone(names), batchOnly)
	for _, sr := range rep.Scenarios {
		var b bytes.Buffer
		PlotScenario(&b, sr, plotted)
		files["controllers/"+sr.Name+".svg"] = b.Bytes()
		if len(sr.Calibration) > 0 {
			var c bytes.Buffer
			PlotCalibration(&c, sr)
			files["controllers/"+sr.Name+"-calibration.svg"] = c.Bytes()
		}
	}
	var b bytes.Buffer
	if err := Markdown(&b, rep, names, "controllers"); err != nil {
		return nil, err
	}
	files["controllers.md"] = b.Bytes()
	return files, nil
}
