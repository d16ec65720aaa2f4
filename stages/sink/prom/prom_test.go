package prom_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/sink"
	"github.com/pace-platform/pace/stages/sink/prom"
)

var _ sink.Sink = (*prom.Sink)(nil)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// series returns metric name → job → value of a registry's pace_job_* gauges.
func series(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 0 {
				continue
			}
			if out[mf.GetName()] == nil {
				out[mf.GetName()] = map[string]float64{}
			}
			out[mf.GetName()][m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestSink(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	s := prom.New(prom.Config{MaxJobs: 2, FinishedTTL: time.Minute}, prom.WithClock(clk))
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)

	eta := schemas.Duration(90 * time.Second)
	s.Write(&schemas.Progress{Job: "a", At: t0, Mode: schemas.Batch, State: schemas.Ongoing, JobProgress: 0.5,
		TimeProgress: 0.75, Error: -0.25, Replicas: 3, Total: 10, Done: 5, QueueLength: 4, InFlight: 1,
		Throughput: 2, PerReplica: 0.5, ETA: &eta, ReplicasNeeded: 4})
	s.Write(&schemas.Progress{Job: "b", At: t0, Mode: schemas.Streaming, State: schemas.Ongoing, Replicas: 1,
		InputRate: 5, OutputRate: 4, Backlog: 7, Lag: schemas.Duration(2 * time.Second)})
	got := series(t, reg)
	for _, tt := range []struct {
		metric, job string
		want        float64
	}{
		{"pace_job_progress_ratio", "a", 0.5},
		{"pace_job_time_progress_ratio", "a", 0.75},
		{"pace_job_progress_error", "a", -0.25},
		{"pace_job_replicas", "a", 3},
		{"pace_job_replicas_needed", "a", 4},
		{"pace_job_eta_seconds", "a", 90},
		{"pace_job_items_total", "a", 10},
		{"pace_job_items_queued", "a", 4},
		{"pace_job_input_rate_items_per_second", "b", 5},
		{"pace_job_backlog_items", "b", 7},
		{"pace_job_lag_seconds", "b", 2},
	} {
		if v, ok := got[tt.metric][tt.job]; !ok || v != tt.want {
			t.Errorf("%s{job=%q} = %v (present %t), want %v", tt.metric, tt.job, v, ok, tt.want)
		}
	}
	if _, ok := got["pace_job_input_rate_items_per_second"]["a"]; ok {
		t.Error("batch job a exports a streaming input rate")
	}
	if _, ok := got["pace_job_eta_seconds"]["b"]; ok {
		t.Error("job b without an ETA exports one")
	}

	// A third job is refused while two are exported.
	s.Write(&schemas.Progress{Job: "c", At: t0})
	if _, ok := series(t, reg)["pace_job_replicas"]["c"]; ok {
		t.Error("job c exported beyond MaxJobs")
	}

	// a finishes: exported for FinishedTTL, then gone; b is deleted.
	s.Write(&schemas.Progress{Job: "a", At: t0.Add(time.Second), State: schemas.Completed, JobProgress: 1})
	clk.Step(59 * time.Second)
	if v := series(t, reg)["pace_job_progress_ratio"]["a"]; v != 1 {
		t.Errorf("finished job a progress = %v, want 1 until its TTL", v)
	}
	clk.Step(time.Second)
	s.Forget("b")
	if diff := cmp.Diff(map[string]map[string]float64{}, series(t, reg)); diff != "" {
		t.Errorf("series left after expiry and deletion (-want +got):\n%s", diff)
	}
}
