package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Controllers are the plugins pace sim compare runs, in table order.
var Controllers = []string{"default", "pid", "hpa", "deadline"}

// FirstJob names the deadline controller on its program's first job: no
// forecast at admission, it learns the item time and start-up as it runs.
const FirstJob = "deadline-first-job"

// Columns are what pace sim compare reports, in table order: the
// Controllers, the deadline controller on a first job, then the Tuned
// yardstick.
var Columns = append(slices.Clone(Controllers), FirstJob, Tuned)

// batchOnly reports whether column name is run on batch scenarios only.
func batchOnly(name string) bool { return name == FirstJob || name == Tuned }

// Summary is one controller's headline figures over a suite.
type Summary struct {
	// FeasibleDeadlinesMet is the fraction of feasible batch scenarios whose
	// deadline was met.
	FeasibleDeadlinesMet float64 `json:"feasible_deadlines_met"`
	// CostVsOracle is the geometric mean of replica-seconds ÷ oracle over the
	// feasible batch scenarios.
	CostVsOracle float64 `json:"cost_vs_oracle"`
	// ScalingActions is the mean number of decisions that changed the replicas.
	ScalingActions float64 `json:"scaling_actions"`
	// StreamingLatencyMet is the fraction of streaming scenarios meeting their p99 target.
	StreamingLatencyMet float64 `json:"streaming_latency_met"`
}

// ScenarioReport is one scenario's results, by controller.
type ScenarioReport struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Mode        schemas.JobMode   `json:"mode"`
	Feasible    bool              `json:"feasible"`
	Oracle      float64           `json:"oracle_replica_seconds,omitempty"`
	Results     map[string]Result `json:"results"`
	Calibration []CalibrationRow  `json:"calibration,omitempty"`
}

// CalibrationRow is one step of a step experiment.
type CalibrationRow struct {
	Replicas  int     `json:"replicas"`
	Simulated float64 `json:"simulated_s"`
	Measured  float64 `json:"measured_s,omitempty"`
}

// Report is the output of pace sim compare.
type Report struct {
	Controllers map[string]Summary `json:"controllers"`
	Scenarios   []ScenarioReport   `json:"scenarios"`
}

// LoadDir loads every *.yaml scenario in dir, in file-name order.
func LoadDir(dir string) ([]Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no *.yaml scenarios in %s: %w", dir, os.ErrNotExist)
	}
	slices.Sort(paths)
	out := make([]Scenario, 0, len(paths))
	for _, p := range paths {
		s, err := Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Compare runs every scenario with every controller in names, each as a
// later job of its program (RunLater: with the forecast Pace's admission
// makes from the program's earlier jobs); FirstJob runs the deadline
// controller without it (Run), Tuned is RunTuned. Results keep their series
// when series is true (for plots), else drop them.
func Compare(scenarios []Scenario, reg plugin.Registry, names []string, series bool) (Report, error) {
	rep := Report{Controllers: map[string]Summary{}}
	for _, s := range scenarios {
		sr := ScenarioReport{Name: s.Name, Description: s.Description, Mode: s.Mode, Feasible: true, Results: map[string]Result{}}
		learned, err := programHistory(s, reg)
		if err != nil {
			return Report{}, err
		}
		for _, name := range names {
			if batchOnly(name) && s.Mode != schemas.Batch {
				continue
			}
			var r Result
			switch name {
			case Tuned:
				r, err = RunTuned(s, reg)
			case FirstJob:
				r, err = Run(s, reg, "deadline")
				r.Controller = FirstJob
			default:
				h := learned
				r, err = runWith(s, reg, name, &h)
			}
			if err != nil {
				return Report{}, err
			}
			if !series {
				r.Series, r.Decisions = nil, nil
			}
			sr.Feasible, sr.Oracle = r.Feasible, r.Oracle
			sr.Results[name] = r
		}
		if c := s.Calibration; c != nil {
			for i, n := range c.Replicas {
				r, err := RunStatic(s, n)
				if err != nil {
					return Report{}, err
				}
				row := CalibrationRow{Replicas: n, Simulated: r.Finish}
				if i < len(c.Measured) {
					row.Measured = c.Measured[i]
				}
				sr.Calibration = append(sr.Calibration, row)
			}
		}
		rep.Scenarios = append(rep.Scenarios, sr)
	}
	for _, name := range names {
		var feasible, met, streams, streamMet, actions int
		logSum := 0.0
		runs := 0
		for _, sr := range rep.Scenarios {
			r, ok := sr.Results[name]
			if !ok {
				continue
			}
			runs++
			actions += r.ScalingActions
			switch {
			case sr.Mode == schemas.Streaming:
				streams++
				if r.Met {
					streamMet++
				}
			case sr.Feasible:
				feasible++
				if r.Met {
					met++
				}
				logSum += math.Log(r.CostVsOracle)
			}
		}
		var sum Summary
		if feasible > 0 {
			sum.FeasibleDeadlinesMet = round6(float64(met) / float64(feasible))
			sum.CostVsOracle = round6(math.Exp(logSum / float64(feasible)))
		}
		if streams > 0 {
			sum.StreamingLatencyMet = round6(float64(streamMet) / float64(streams))
		}
		if runs > 0 {
			sum.ScalingActions = round6(float64(actions) / float64(runs))
		}
		rep.Controllers[name] = sum
	}
	return rep, nil
}
