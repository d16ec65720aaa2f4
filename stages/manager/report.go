package manager

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// reportTime is the format of report timestamps (Asperathos' Influx time).
const reportTime = "2006-01-02T15:04:05Z"

// maxReportSamples bounds a detailed report computed from results.
const maxReportSamples = 3600

// ReportSample is one entry of the detailed report.
type ReportSample struct {
	JobProgress  float64 `json:"job_progress"`
	TimeProgress float64 `json:"time_progress"`
	Replicas     int     `json:"replicas"`
	Error        float64 `json:"error"`
	// A job with a cost: kubejobs_cost's keys. current_spent is the cost
	// rate at the sample (as Asperathos named it), spent what the job has
	// spent so far, application_cost_error the rate minus the desired one.
	CurrentSpent *float64 `json:"current_spent,omitempty"`
	DesiredCost  *float64 `json:"desired_cost,omitempty"`
	CostError    *float64 `json:"application_cost_error,omitempty"`
	Spent        *float64 `json:"spent,omitempty"`
}

// Detailed is the detailed report: samples keyed by their time (reportTime).
type Detailed map[string]ReportSample

// Summary is the summary report: Asperathos' fields, then Pace's own.
type Summary struct {
	// ScalingStrategy is the controller that ran the job (the default one,
	// the deadline controller, when its spec names none).
	ScalingStrategy  string          `json:"scaling_strategy"`
	HeuristicOptions json.RawMessage `json:"heuristic_options"`
	// MaxError, MinError and FinalError are [value, time]; the time is a key
	// of the detailed report holding the same error.
	MaxError      [2]any `json:"max_error"`
	MinError      [2]any `json:"min_error"`
	FinalError    [2]any `json:"final_error"`
	FinalReplicas int    `json:"final_replicas"`
	// ExecutionTime is whole seconds from the first sample to the first with
	// all items done (or to the last sample).
	ExecutionTime int `json:"execution_time"`

	DeadlineMet     *bool   `json:"deadline_met,omitempty"`
	LatenessSeconds float64 `json:"lateness_seconds"`
	ReplicaSeconds  float64 `json:"replica_seconds"`
	// Cost is what a job with a cost spent, in its prices' units.
	Cost        *float64 `json:"cost,omitempty"`
	ItemsOK     int      `json:"items_ok"`
	ItemsDead   int      `json:"items_dead"`
	ItemTimeP50 float64  `json:"item_time_p50_seconds"`
	ItemTimeP95 float64  `json:"item_time_p95_seconds"`
	// Source is where the samples come from: "progress" (the monitor's
	// samples) or "results" (computed from results and dead letters).
	Source  string `json:"source"`
	Samples int    `json:"samples"`
	// ControllerParams are the parameters the job gave its controller
	// (controller.params); absent when it gave none.
	ControllerParams json.RawMessage `json:"controller_params,omitempty"`
}

// Report computes a job's detailed and summary reports.
func (m *Stage) Report(ctx context.Context, rec *schemas.JobRecord) (Detailed, *Summary, error) {
	results, err := m.bus.Outputs().StoredResults(ctx, rec.ID)
	if err != nil {
		return nil, nil, err
	}
	dead, err := m.bus.Letters().Stored(ctx, rec.ID)
	if err != nil {
		return nil, nil, err
	}
	// Items refused while the job did not accept items were never its work.
	dead = slices.DeleteFunc(dead, func(d *schemas.DeadLetter) bool { return d.Reason == schemas.RefusedItem })
	progress, err := m.bus.Outputs().StoredProgress(ctx, rec.ID)
	if err != nil {
		return nil, nil, err
	}
	end := rec.FinishedAt
	if end.IsZero() {
		end = m.clock.Now()
	}
	var d Detailed
	source := "progress"
	if len(progress) > 0 {
		d = fromProgress(progress)
	} else {
		source = "results"
		d = fromResults(rec, results, dead, end)
	}
	s := summarize(rec, d, results, dead, end)
	s.Source = source
	return d, s, nil
}

func fromProgress(ps []*schemas.Progress) Detailed {
	d := Detailed{}
	for _, p := range ps {
		s := ReportSample{JobProgress: p.JobProgress, TimeProgress: p.TimeProgress, Replicas: p.Replicas, Error: p.Error}
		if p.CostRate != 0 || p.Spent != 0 || p.DesiredCost != nil {
			s.CurrentSpent, s.Spent, s.DesiredCost = &p.CostRate, &p.Spent, p.DesiredCost
			if p.DesiredCost != nil {
				s.CostError = &p.Error
			}
		}
		d[p.At.UTC().Format(reportTime)] = s
	}
	return d
}

// fromResults rebuilds per-second samples from when items finished:
// job progress = finished items / total, time progress = elapsed /
// deadline, error = their difference, replicas = workers busy in the second.
func fromResults(rec *schemas.JobRecord, results []*schemas.Result, dead []*schemas.DeadLetter, end time.Time) Detailed {
	d := Detailed{}
	start := rec.StartedAt
	if start.IsZero() {
		return d
	}
	start = start.UTC().Truncate(time.Second)
	end = end.UTC().Truncate(time.Second).Add(time.Second)
	var done []time.Time
	for _, r := range results {
		done = append(done, r.FinishedAt)
	}
	for _, dl := range dead {
		done = append(done, dl.At)
	}
	slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
	if n := len(done); n > 0 && done[n-1].After(end) {
		end = done[n-1].UTC().Truncate(time.Second).Add(time.Second) // workers' clocks may run ahead
	}
	step := time.Second
	if n := int(end.Sub(start) / time.Second); n > maxReportSamples {
		step = time.Duration(math.Ceil(float64(n)/maxReportSamples)) * time.Second
	}
	deadline := rec.Spec.Deadline.Time(rec.StartedAt).Sub(rec.StartedAt)
	total := rec.Total
	for t := start; !t.After(end); t = t.Add(step) {
		n := sort.Search(len(done), func(i int) bool { return done[i].After(t) })
		s := ReportSample{}
		if total > 0 {
			s.JobProgress = math.Min(1, float64(n)/float64(total))
		}
		if deadline > 0 {
			s.TimeProgress = round(t.Sub(start).Seconds() / deadline.Seconds())
		}
		s.Error = round(s.JobProgress - s.TimeProgress)
		s.JobProgress = round(s.JobProgress)
		workers := map[string]bool{}
		for _, r := range results {
			busyFrom := r.FinishedAt.Add(-r.Duration.D())
			if busyFrom.Before(t) && r.FinishedAt.After(t.Add(-step)) {
				workers[r.Worker] = true
			}
		}
		s.Replicas = len(workers)
		d[t.Format(reportTime)] = s
	}
	return d
}

func summarize(rec *schemas.JobRecord, d Detailed, results []*schemas.Result, dead []*schemas.DeadLetter, end time.Time) *Summary {
	s := &Summary{ScalingStrategy: rec.Spec.Controller.Name, HeuristicOptions: json.RawMessage("null"),
		ItemsOK: len(results), ItemsDead: len(dead), Samples: len(d), ControllerParams: rec.Spec.Controller.Params}
	if s.ScalingStrategy == "" {
		s.ScalingStrategy = schemas.DefaultController
	}
	if s.ScalingStrategy == "pid" {
		var p controllerParams
		if json.Unmarshal(rec.Spec.Controller.Params, &p) == nil && p.HeuristicOptions != nil {
			s.HeuristicOptions, _ = json.Marshal(p.HeuristicOptions)
		}
	}
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var first, prev, doneAt time.Time
	for i, k := range keys {
		v := d[k]
		t, _ := time.Parse(reportTime, k)
		if i == 0 {
			first = t
			s.MaxError, s.MinError = [2]any{v.Error, k}, [2]any{v.Error, k}
		} else {
			s.ReplicaSeconds += float64(d[keys[i-1]].Replicas) * t.Sub(prev).Seconds()
		}
		if v.Error > s.MaxError[0].(float64) {
			s.MaxError = [2]any{v.Error, k}
		}
		if v.Error < s.MinError[0].(float64) {
			s.MinError = [2]any{v.Error, k}
		}
		s.FinalError = [2]any{v.Error, k}
		if v.Replicas > 0 {
			s.FinalReplicas = v.Replicas
		}
		if doneAt.IsZero() && v.JobProgress >= 1 {
			doneAt = t
		}
		if v.Spent != nil {
			s.Cost = v.Spent // what was spent by the last sample
		}
		prev = t
	}
	if doneAt.IsZero() {
		doneAt = prev
	}
	s.ExecutionTime = int(doneAt.Sub(first) / time.Second)
	if dl := rec.Spec.Deadline.Time(rec.StartedAt); !dl.IsZero() && !rec.StartedAt.IsZero() {
		met := rec.State == schemas.Completed && !end.After(dl)
		if rec.State.Final() || end.After(dl) {
			s.DeadlineMet = &met
		}
		s.LatenessSeconds = round(math.Max(0, end.Sub(dl).Seconds()))
	}
	var durs []float64
	for _, r := range results {
		durs = append(durs, r.Duration.D().Seconds())
	}
	s.ItemTimeP50, s.ItemTimeP95 = percentile(durs, 0.5), percentile(durs, 0.95)
	s.ReplicaSeconds = round(s.ReplicaSeconds)
	return s
}

// percentile is the nearest-rank percentile of xs.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return round(xs[max(0, i)])
}

func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
