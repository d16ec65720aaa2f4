package pid_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/pid"
	"github.com/pace-platform/pace/stages/controller/plugin/plugintest"
)

var _ plugin.Controller = (*pid.Controller)(nil)

func sample(sec int, e float64) schemas.Progress {
	return schemas.Progress{Job: "j", At: plugintest.At(sec), Error: e}
}

func TestRecordedSequences(t *testing.T) {
	job := plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1}
	for _, tc := range []struct {
		name   string
		job    plugin.Job
		params string
		errs   []float64
		want   []int
	}{
		{
			// s1: P 1.5, D 0, I 0.75 → trunc 2.25 = 2; s2: P 0.5, D −0.5, I 1.0 → 1;
			// s3: P −0.3, D −0.4, I 0.85 → trunc 0.15 = 0.
			name:   "hand-computed P, I and D",
			job:    job,
			params: `{"heuristic_options": {"proportional_gain": 1, "integral_gain": 0.5, "derivative_gain": 0.5}}`,
			errs:   []float64{-1.5, -0.5, 0.3},
			want:   []int{3, 4, 4},
		},
		{
			name:   "error -2 raises replicas",
			job:    job,
			params: `{"heuristic_options": {"proportional_gain": 1, "integral_gain": 0, "derivative_gain": 0}}`,
			errs:   []float64{-2},
			want:   []int{3},
		},
		{
			// −0.7 truncates toward zero to 0, not down to −1.
			name:   "truncation toward zero",
			job:    plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 5},
			params: `{"heuristic_options": {"proportional_gain": 1, "integral_gain": 0, "derivative_gain": 0}}`,
			errs:   []float64{0.7, 1.7, -0.7},
			want:   []int{5, 4, 4},
		},
		{
			name:   "clamped to max and min",
			job:    job,
			params: `{"heuristic_options": {"proportional_gain": 1, "integral_gain": 0, "derivative_gain": 0}}`,
			errs:   []float64{-30, 30},
			want:   []int{10, 1},
		},
		{
			// Asperathos' gains: 0.1·0.5 + 0.1·0.5·n reaches 1 at n = 19.
			name:   "Asperathos gains wait for the integral",
			job:    job,
			params: `{"heuristic_options": {"proportional_gain": 0.1, "integral_gain": 0.1, "derivative_gain": 0}}`,
			errs:   []float64{-0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5},
			want:   []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2},
		},
		{
			name:   "error 0 re-asserts the clamp",
			job:    plugin.Job{Name: "j", Min: 2, Max: 10, Initial: 1},
			params: `{"heuristic_options": {"proportional_gain": 0.1, "integral_gain": 0.1, "derivative_gain": 0}}`,
			errs:   []float64{0},
			want:   []int{2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var samples []schemas.Progress
			for i, e := range tc.errs {
				samples = append(samples, sample(2*(i+1), e))
			}
			got, _ := plugintest.Decide(t, plugintest.New(t, pid.New, tc.job, tc.params), samples...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
		})
	}
}

const integralOnly = `{"heuristic_options": {"proportional_gain": 0, "integral_gain": 1, "derivative_gain": 0}}`

func TestStaleSampleLeavesIntegral(t *testing.T) {
	c := plugintest.New(t, pid.New, plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1}, integralOnly)
	plugintest.Decide(t, c, sample(2, -0.6))
	if _, err := c.Decide(sample(2, -0.6)); !errors.Is(err, plugin.ErrStale) {
		t.Fatalf("err = %v, want ErrStale", err)
	}
	st, err := c.State()
	if err != nil {
		t.Fatal(err)
	}
	var s pid.State
	if err := json.Unmarshal(st, &s); err != nil {
		t.Fatal(err)
	}
	if s.Integral != -0.6 || s.LastError == nil || *s.LastError != -0.6 {
		t.Errorf("state after a stale sample = %+v, want integral -0.6 and last error -0.6", s)
	}
	if got, _ := plugintest.Decide(t, c, sample(4, -0.6)); got[0] != 2 { // integral −1.2 → +1
		t.Errorf("replicas = %d, want 2", got[0])
	}
}

func TestStateResumes(t *testing.T) {
	plugintest.CheckResume(t, pid.New, plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1}, integralOnly,
		[]schemas.Progress{sample(2, -0.6)}, sample(4, -0.6))
}

// TestReasonsSayWhatTheBoundsDid: the reason names the bound that changed
// the count, and only then.
func TestReasonsSayWhatTheBoundsDid(t *testing.T) {
	job := plugin.Job{Name: "j", Min: 1, Max: 4, Initial: 2}
	for _, tc := range []struct {
		name   string
		e      float64
		want   int
		reason string
	}{
		{"within the bounds", -1, 3, "error -1: P 1 + I 0 + D 0 = 1, truncated to +1: 3"},
		{"capped by max_rep", -5, 4, "error -5: P 5 + I 0 + D 0 = 5, truncated to +5: 7, limited by max_rep (4): 4"},
		{"raised to min_rep", 5, 1, "error 5: P -5 + I -0 + D 0 = -5, truncated to -5: -3, raised to min_rep (1): 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plugintest.New(t, pid.New, job, `{"heuristic_options": {"proportional_gain": 1}}`)
			_, d := plugintest.Decide(t, c, sample(1, tc.e))
			if d.Replicas != tc.want || d.Reason != tc.reason {
				t.Errorf("decision %d %q, want %d %q", d.Replicas, d.Reason, tc.want, tc.reason)
			}
		})
	}
}
