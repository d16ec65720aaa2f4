package pid_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/pid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sample(sec int, e float64) schemas.Progress {
	return schemas.Progress{Job: "j", At: t0.Add(time.Duration(sec) * time.Second), Error: e}
}

func run(t *testing.T, job plugin.Job, params string, errs []float64) []int {
	t.Helper()
	c, err := pid.New(job, json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for i, e := range errs {
		d, err := c.Decide(sample(2*(i+1), e))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Replicas)
	}
	return got
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
			if diff := cmp.Diff(tc.want, run(t, tc.job, tc.params, tc.errs)); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaleSampleLeavesIntegral(t *testing.T) {
	c, err := pid.New(plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1},
		json.RawMessage(`{"heuristic_options": {"proportional_gain": 0, "integral_gain": 1, "derivative_gain": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decide(sample(2, -0.6)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decide(sample(2, -0.6)); !errors.Is(err, plugin.ErrStale) {
		t.Fatalf("err = %v, want ErrStale", err)
	}
	st, _ := c.State()
	c2, _ := pid.New(plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 1}, nil)
	if err := c2.Restore(st); err != nil {
		t.Fatal(err)
	}
	st2, _ := c2.State()
	var s pid.State
	if err := json.Unmarshal(st2, &s); err != nil {
		t.Fatal(err)
	}
	if s.Integral != -0.6 || s.LastError == nil || *s.LastError != -0.6 {
		t.Errorf("state after a stale sample = %+v, want integral -0.6 and last error -0.6", s)
	}
	d, _ := c.Decide(sample(4, -0.6)) // integral −1.2 → +1
	if d.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", d.Replicas)
	}
}
