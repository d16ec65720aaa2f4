package deadline_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/deadline"
	"github.com/pace-platform/pace/stages/controller/plugin/plugintest"
)

// batch is a progress message of a 110-item job due 100 s after plugintest.T0.
var _ plugin.Controller = (*deadline.Controller)(nil)

func batch(sec, done, replicas, inFlight, queue int) schemas.Progress {
	return schemas.Progress{
		Job: "j", At: plugintest.At(sec), Total: 110, Done: done,
		Replicas: replicas, InFlight: inFlight, QueueLength: queue, TimeProgress: float64(sec) / 100,
	}
}

// stream is a progress message of a streaming job.
func stream(sec, replicas int, inputRate float64, backlog int) schemas.Progress {
	return schemas.Progress{Job: "j", At: plugintest.At(sec), Mode: schemas.Streaming, Replicas: replicas, InputRate: inputRate, Backlog: backlog}
}

var (
	job   = plugin.Job{Name: "j", Expected: 100 * time.Second, Min: 1, Max: 10, Initial: 1}
	eight = plugin.Job{Name: "j", Expected: 100 * time.Second, Min: 1, Max: 10, Initial: 8}
)

func TestRecordedSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		job     plugin.Job
		params  string
		samples []schemas.Progress
		want    []int
		reason  string // in the last decision's reason
	}{
		{
			name:    "no throughput yet: hold",
			samples: []schemas.Progress{batch(2, 0, 0, 0, 110)},
			want:    []int{1},
			reason:  "no throughput measured yet",
		},
		{
			// Earlier jobs of the program took 1 s an item and 5 s to start: μ = 1/s
			// before any is measured. T' = 98·0.95 − 1 = 92.1 s; the initial replica,
			// asked for at 0, works from 5 s: 89.1 of 110 replica-seconds; a new one
			// does 87.1: 1 + 20.9/87.1 → 2, at the first sample.
			name: "a forecast sizes the job before a rate is measured",
			job: plugin.Job{Name: "j", Expected: 100 * time.Second, Min: 1, Max: 10, Initial: 1,
				ItemTime: time.Second, Startup: 5 * time.Second, Basis: schemas.BasisHistory},
			samples: []schemas.Progress{batch(2, 0, 0, 0, 110)},
			want:    []int{2},
			reason:  "1 items/s per replica (history)",
		},
		{
			// μ = 10 items / 10 busy replica-seconds = 1/s; T' = 90·0.95 − 1 = 84.5 s;
			// 100 s of work: 1 live does 84.5, one new replica does 74.5: 1 + 15.5/74.5 → 2.
			name:    "feed-forward with start-up delay",
			samples: []schemas.Progress{batch(0, 0, 1, 1, 109), batch(10, 10, 1, 1, 99)},
			want:    []int{1, 2},
			reason:  "new ones lose 10s to start-up",
		},
		{
			// After the scale-up to 5 at 70 s, a slower interval asks for about 7,
			// but 4 replicas are still starting: wait for them.
			name:    "wait for a pending scale-up",
			samples: []schemas.Progress{batch(60, 0, 1, 1, 109), batch(70, 10, 1, 1, 99), batch(72, 10, 1, 1, 99)},
			want:    []int{1, 5, 5},
			reason:  "wait for the starting replicas",
		},
		{
			// At 74 s the rate has fallen to 10/14 items/s and asks for about 13
			// replicas, more than max: still, 4 are starting, so wait for them.
			name:    "a pending scale-up is waited for before going to max",
			samples: []schemas.Progress{batch(60, 0, 1, 1, 109), batch(70, 10, 1, 1, 99), batch(74, 10, 1, 1, 99)},
			want:    []int{1, 5, 5},
			reason:  "wait for the starting replicas",
		},
		{
			// 30 s left: T' = 27.5 s, 100 s of work: 1 + (100 − 27.5)/17.5 = 5.14 → 6,
			// limited to +4.
			name:    "late job, rate-limited scale-up",
			samples: []schemas.Progress{batch(60, 0, 1, 1, 109), batch(70, 10, 1, 1, 99)},
			want:    []int{1, 5},
			reason:  "scale up, limited to +4",
		},
		{
			// The same late job with max 3: even max cannot make it, so max at once.
			name:    "infeasible at max: max at once",
			job:     plugin.Job{Name: "j", Expected: 100 * time.Second, Min: 1, Max: 3, Initial: 1},
			samples: []schemas.Progress{batch(60, 0, 1, 1, 109), batch(70, 10, 1, 1, 99)},
			want:    []int{1, 3},
			reason:  "more than max 3: max at once for the least lateness",
		},
		{
			name:    "tail releases idle replicas at once",
			job:     plugin.Job{Name: "j", Expected: 100 * time.Second, Min: 1, Max: 10, Initial: 6},
			samples: []schemas.Progress{batch(50, 100, 6, 6, 4), batch(52, 107, 6, 3, 0)},
			want:    []int{6, 3},
			reason:  "release the idle ones",
		},
		{
			name:    "deadline reached: finish as fast as possible",
			samples: []schemas.Progress{batch(90, 0, 1, 1, 109), batch(99, 10, 1, 1, 99)},
			want:    []int{1, 10},
			reason:  "too late for the deadline; finish as fast as possible",
		},
		{
			// The work soon needs far fewer than 8 replicas, but busy replicas of a
			// batch job cost only their work: no scale-down while the queue lasts.
			name:    "batch keeps busy replicas until the tail",
			job:     eight,
			samples: []schemas.Progress{batch(0, 0, 8, 8, 102), batch(2, 16, 8, 8, 86), batch(4, 32, 8, 8, 70)},
			want:    []int{8, 8, 8},
			reason:  "keep them until the queue drains",
		},
		{
			// 1 item/s per replica and 10 s between decisions: 8 replicas would empty
			// the 22 queued items in under 3 s and idle; 3 take them, 5 finish and exit.
			name:    "tail: keep the replicas the last queued items need",
			job:     eight,
			samples: []schemas.Progress{batch(0, 0, 8, 8, 102), batch(10, 80, 8, 8, 22)},
			want:    []int{8, 3},
			reason:  "keep 3 to take them, the others finish their item and exit",
		},
		{
			// 28 s since the last decision, but decisions came 2 s apart before: the
			// 20 queued items outlast the next one, so no replica is let go yet.
			name:    "tail: a long pause is not the pace of decisions",
			job:     eight,
			samples: []schemas.Progress{batch(0, 0, 8, 8, 102), batch(2, 6, 8, 8, 96), batch(30, 82, 8, 8, 20)},
			want:    []int{8, 8, 8},
			reason:  "keep them until the queue drains",
		},
		{
			// Streaming at 2 items/s per replica: 2/s in needs 1 replica; halving is the
			// limit per decision (8 → 4 → 2); at 7/s in, 3.5 → 4 at once.
			name:    "streaming scale-down limit, then scale-up",
			job:     plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 8},
			params:  `{"prior_rate": 2}`,
			samples: []schemas.Progress{stream(0, 8, 2, 0), stream(5, 4, 2, 0), stream(6, 2, 7, 0)},
			want:    []int{4, 2, 4},
			reason:  "scale up",
		},
		{
			// (10/s in + 60 backlog / 30 s) / 2 per replica = 6.
			name:    "streaming: arrival rate plus catch-up",
			job:     plugin.Job{Name: "j", Min: 1, Max: 10, Initial: 2},
			params:  `{"prior_rate": 2}`,
			samples: []schemas.Progress{stream(0, 2, 10, 60)},
			want:    []int{6},
			reason:  "streaming",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.job.Name == "" {
				tc.job = job
			}
			got, last := plugintest.Decide(t, plugintest.New(t, deadline.New, tc.job, tc.params), tc.samples...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replicas (-want +got):\n%s\nlast reason: %s", diff, last.Reason)
			}
			if !strings.Contains(last.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", last.Reason, tc.reason)
			}
		})
	}
}

func TestStaleAndResume(t *testing.T) {
	c := plugintest.New(t, deadline.New, job, "")
	plugintest.Decide(t, c, batch(0, 0, 1, 1, 109))
	if _, err := c.Decide(batch(0, 5, 1, 1, 104)); !errors.Is(err, plugin.ErrStale) {
		t.Fatalf("err = %v, want ErrStale", err)
	}
	// Resumed mid-job with a rate measured and a scale-up starting.
	plugintest.CheckResume(t, deadline.New, job, "", []schemas.Progress{batch(60, 0, 1, 1, 109), batch(70, 10, 1, 1, 99)}, batch(72, 12, 1, 1, 97))
}

func TestInvalidConfig(t *testing.T) {
	for _, params := range []string{`{"margin": -1}`, `{"startup": "1s"}`, `{"margin": 0.5, "max_correction": 0.5}`} {
		if _, err := deadline.New(job, json.RawMessage(params)); !errors.Is(err, plugin.ErrInvalidConfig) {
			t.Errorf("New(%s) err = %v, want ErrInvalidConfig", params, err)
		}
	}
}

// TestReasonsSayWhatTheBoundsDid: when replicas.min, replicas.max or the one
// replica work needs change the smoothed count, the reason says so, and a
// decision that keeps the count never reads "scale down" (issue 19: replicas
// = current = min said "scale down: 1").
func TestReasonsSayWhatTheBoundsDid(t *testing.T) {
	for _, tc := range []struct {
		name     string
		job      plugin.Job
		params   string
		sample   schemas.Progress
		replicas int
		reason   string // the reason's end, after the plan
	}{
		{
			name:     "idle at the minimum",
			job:      plugin.Job{Name: "j", Min: 1, Max: 4, Initial: 1},
			params:   `{"prior_rate": 1}`,
			sample:   stream(1, 1, 0, 0),
			replicas: 1,
			reason:   "; hold at replicas.min (1): 1",
		},
		{
			name:     "capped by the maximum",
			job:      plugin.Job{Name: "j", Min: 0, Max: 4, Initial: 2},
			params:   `{"prior_rate": 1}`,
			sample:   stream(1, 2, 100, 0),
			replicas: 4,
			reason:   "; limited by replicas.max (4): 4",
		},
		{
			name:     "raised to the minimum",
			job:      plugin.Job{Name: "j", Min: 2, Max: 4, Initial: 0},
			sample:   stream(1, 0, 0, 0),
			replicas: 2,
			reason:   "no throughput measured yet: hold; raised to replicas.min (2): 2",
		},
		{
			name:     "one replica while work is left",
			job:      plugin.Job{Name: "j", Expected: 100 * time.Second, Min: 0, Max: 4, Initial: 0},
			sample:   batch(1, 0, 0, 0, 110),
			replicas: 1,
			reason:   "no throughput measured yet: hold; raised to 1 while work is left: 1",
		},
		{
			name:     "within the bounds",
			job:      plugin.Job{Name: "j", Min: 0, Max: 10, Initial: 2},
			params:   `{"prior_rate": 1}`,
			sample:   stream(1, 2, 4, 0),
			replicas: 4,
			reason:   "; scale up: 4",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, d := plugintest.Decide(t, plugintest.New(t, deadline.New, tc.job, tc.params), tc.sample)
			if d.Replicas != tc.replicas || !strings.HasSuffix(d.Reason, tc.reason) {
				t.Errorf("decision %d %q, want %d ending in %q", d.Replicas, d.Reason, tc.replicas, tc.reason)
			}
			if d.Replicas == d.Current && strings.Contains(d.Reason, "scale down") {
				t.Errorf("reason %q of a decision keeping %d replicas says scale down", d.Reason, d.Current)
			}
		})
	}
}

// TestRateFollowsAChangeOfPace: when items get twice as slow, the estimate
// starts again from the recent samples instead of drifting over the whole
// rate window.
func TestRateFollowsAChangeOfPace(t *testing.T) {
	long := plugin.Job{Name: "j", Expected: 1000 * time.Second, Min: 1, Max: 10, Initial: 2}
	var samples []schemas.Progress
	done := 0
	for sec := 0; sec <= 100; sec += 2 {
		samples = append(samples, schemas.Progress{Job: "j", At: plugintest.At(sec), Total: 5000, Done: done,
			Replicas: 2, InFlight: 2, QueueLength: 5000 - done - 2, TimeProgress: float64(sec) / 1000})
		if sec < 60 {
			done += 8 // 2 items/s per replica
		} else {
			done += 4 // 1 item/s per replica
		}
	}
	_, d := plugintest.Decide(t, plugintest.New(t, deadline.New, long, ""), samples...)
	// The 60 s window alone would still be at about 1.4 items/s: 40 s after
	// the change, e^(-40/60) of the old pace is left.
	if got := d.Inputs["rate"]; got < 0.9 || got > 1.15 {
		t.Errorf("rate %.3f items/s per replica 40 s after the pace halved, want about 1", got)
	}
}

// TestForecastWeighsAsItsHistory: a forecast of 1 s an item counts as the
// items it rests on — a hint as 10, a history as its samples, up to 100 —
// so four fast first items (2 items/s over 2 busy seconds) move a hint's
// estimate more than a long history's.
func TestForecastWeighsAsItsHistory(t *testing.T) {
	samples := []schemas.Progress{batch(2, 0, 1, 1, 109), batch(4, 4, 1, 1, 105)}
	for _, tc := range []struct {
		name    string
		basis   string
		samples int
		want    float64 // (w + 4 items) / (w·1 s + 2 s), w decayed by e^(-2/60)
	}{
		{"hint", schemas.BasisHint, 0, 1.17},
		{"history of 20 items", schemas.BasisHistory, 20, 1.09},
		{"history of 100 items", schemas.BasisHistory, 100, 1.02},
		{"history of 5000 items", schemas.BasisHistory, 5000, 1.02},
		{"history of 3 items", schemas.BasisHistory, 3, 1.17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := job
			j.ItemTime, j.Startup, j.Basis, j.Samples = time.Second, time.Second, tc.basis, tc.samples
			_, d := plugintest.Decide(t, plugintest.New(t, deadline.New, j, ""), samples...)
			if got := d.Inputs["rate"]; got < tc.want-0.01 || got > tc.want+0.01 {
				t.Errorf("rate %.3f items/s per replica, want %.2f", got, tc.want)
			}
		})
	}
}
