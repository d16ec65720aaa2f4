package threshold_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/plugintest"
	"github.com/pace-platform/pace/stages/controller/plugin/threshold"
)

var _ plugin.Controller = (*threshold.Controller)(nil)

func sample(sec int, e float64) schemas.Progress {
	return schemas.Progress{Job: "j", At: plugintest.At(sec), Error: e, Replicas: 1}
}

func TestScale(t *testing.T) {
	bounds := plugin.Bounds{MinRep: 1, MaxRep: 10}
	cfg := threshold.Config{TriggerUp: 0.1, TriggerDown: 0.2, ActuationSize: 2, Bounds: bounds}
	zero := threshold.Config{ActuationSize: 2, Bounds: bounds}
	for _, tc := range []struct {
		name    string
		cfg     threshold.Config
		r       int
		e       float64
		want    int
		wantAct bool
	}{
		{"error -2 with triggers 0 raises", zero, 1, -2, 3, true},
		{"error +2 with triggers 0 lowers to min", zero, 2, 2, 1, true},
		{"error 0 with triggers 0 does nothing", zero, 4, 0, 4, false},
		{"late beyond trigger_up", cfg, 9, -0.1, 10, true},
		{"late within trigger_up", cfg, 4, -0.09, 4, false},
		{"early at trigger_down", cfg, 4, 0.2, 2, true},
		{"early within trigger_down", cfg, 4, 0.19, 4, false},
		{"capped at max_rep", cfg, 10, -0.5, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, act := tc.cfg.Scale(tc.r, tc.e)
			if got != tc.want || act != tc.wantAct {
				t.Errorf("Scale(%d, %g) = %d, %v; want %d, %v", tc.r, tc.e, got, act, tc.want, tc.wantAct)
			}
		})
	}
}

// TestRecordedSequence replays Asperathos' simulator setup (actuation_size 2,
// triggers 0, min 1 max 10) on a recorded error sequence with a stale repeat.
func TestRecordedSequence(t *testing.T) {
	c := plugintest.New(t, threshold.New, plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1}, `{"actuation_size": 2, "trigger_up": 0, "trigger_down": 0}`)
	steps := []struct {
		p     schemas.Progress
		want  int
		stale bool
	}{
		{sample(2, 0), 1, false},
		{sample(4, -0.05), 3, false},
		{sample(4, -0.05), 0, true}, // same timestamp: not acted on
		{sample(3, -0.5), 0, true},  // older: not acted on
		{sample(6, -0.1), 5, false},
		{sample(8, -0.2), 7, false},
		{sample(10, -0.3), 9, false},
		{sample(12, -0.1), 10, false},
		{sample(14, 0.05), 8, false},
		{sample(16, 0.3), 6, false},
	}
	var got, want []int
	for _, s := range steps {
		d, err := c.Decide(s.p)
		if s.stale {
			if !errors.Is(err, plugin.ErrStale) {
				t.Fatalf("at %v: err = %v, want ErrStale", s.p.At, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason == "" || d.Controller != threshold.Name || !d.At.Equal(s.p.At) {
			t.Errorf("decision %+v lacks reason, controller or time", d)
		}
		got, want = append(got, d.Replicas), append(want, s.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
}

func TestStateResumes(t *testing.T) {
	job := plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1}
	plugintest.CheckResume(t, threshold.New, job, `{"actuation_size": 2}`, []schemas.Progress{sample(2, -1)}, sample(4, -1))
	got, _ := plugintest.Decide(t, plugintest.New(t, threshold.New, job, `{"actuation_size": 2}`), sample(2, -1), sample(4, -1))
	if diff := cmp.Diff([]int{3, 5}, got); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct{ name, params string }{
		{"unknown field", `{"trigger": 1}`},
		{"negative trigger", `{"trigger_up": -1}`},
		{"max below min", `{"min_rep": 5, "max_rep": 2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := threshold.New(plugin.Job{Name: "j", Min: 1, Max: 10}, json.RawMessage(tc.params))
			if !errors.Is(err, plugin.ErrInvalidConfig) {
				t.Errorf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestReasonsSayWhatTheBoundsDid: a step the bounds change says so, and a
// decision keeping the count at min_rep is no scale-down.
func TestReasonsSayWhatTheBoundsDid(t *testing.T) {
	job := plugin.Job{Name: "j", Min: 1, Max: 4, Initial: 1}
	for _, tc := range []struct {
		name    string
		initial int
		e       float64
		want    int
		reason  string
	}{
		{"late, within the bounds", 2, -1, 3, "late: error -1, |error| >= trigger_up 0.5: 2 + 1: 3"},
		{"late at max_rep", 4, -1, 4, "late: error -1, |error| >= trigger_up 0.5: 4 + 1, limited by max_rep (4): 4"},
		{"early, within the bounds", 3, 1, 2, "early: error 1 >= trigger_down 0.5: 3 - 1: 2"},
		{"early at min_rep", 1, 1, 1, "early: error 1 >= trigger_down 0.5: 1 - 1, hold at min_rep (1): 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := job
			j.Initial = tc.initial
			c := plugintest.New(t, threshold.New, j, `{"trigger_up": 0.5, "trigger_down": 0.5}`)
			_, d := plugintest.Decide(t, c, sample(1, tc.e))
			if d.Replicas != tc.want || d.Reason != tc.reason {
				t.Errorf("decision %d %q, want %d %q", d.Replicas, d.Reason, tc.want, tc.reason)
			}
		})
	}
}
