package hpa_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/hpa"
	"github.com/pace-platform/pace/stages/controller/plugin/plugintest"
)

var _ plugin.Controller = (*hpa.Controller)(nil)

func lag(sec, items int) schemas.Progress {
	return schemas.Progress{Job: "j", At: plugintest.At(sec), QueueLength: items}
}

func TestRecordedSequence(t *testing.T) {
	c := plugintest.New(t, hpa.New, plugin.Job{Name: "j", Min: 1, Max: 20, Initial: 1}, `{"scale_down_window": "30s"}`)
	// 0: ceil(100/10) = 10, limited to max(1+4, 2·1) = 5; 5: still limited (1 was in
	// effect 15 s ago); 15: max(5+4, 2·5) = 10; 20: 105/(10·10) is within tolerance
	// 0.1; 25: 4 recommended but the 30 s down window holds the earlier 10; 60: only
	// 4 in the window; 70: max(4, 0) = 4; 100: 0 clamped to min 1; 101: the count in
	// effect 15 s ago was 4, so up to max(4+4, 2·4) = 8.
	want := []int{5, 5, 10, 10, 10, 4, 4, 1, 8}
	got, _ := plugintest.Decide(t, c, lag(0, 100), lag(5, 100), lag(15, 100), lag(20, 105), lag(25, 40),
		lag(60, 40), lag(70, 0), lag(100, 0), lag(101, 400))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
}

// TestStateResumes: the windows and the rate-limit history survive a restart.
func TestStateResumes(t *testing.T) {
	plugintest.CheckResume(t, hpa.New, plugin.Job{Name: "j", Min: 1, Max: 20, Initial: 1}, `{"scale_down_window": "30s"}`,
		[]schemas.Progress{lag(0, 100), lag(15, 100), lag(25, 40)}, lag(60, 40))
}

// TestReasonsSayWhatTheBoundsDid: the reason names the bound that changed
// the count, and only then.
func TestReasonsSayWhatTheBoundsDid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		job    plugin.Job
		items  int
		want   int
		reason string
	}{
		{"within the bounds", plugin.Job{Name: "j", Min: 1, Max: 20, Initial: 2}, 30, 3, "lag 30 / target 10 = 3: 3"},
		{"capped by replicas.max", plugin.Job{Name: "j", Min: 1, Max: 4, Initial: 2}, 60, 4, "lag 60 / target 10 = 6, limited by replicas.max (4): 4"},
		{"held at replicas.min", plugin.Job{Name: "j", Min: 2, Max: 4, Initial: 2}, 0, 2, "lag 0 / target 10 = 0, hold at replicas.min (2): 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plugintest.New(t, hpa.New, tc.job, `{"scale_down_window": "0s"}`)
			_, d := plugintest.Decide(t, c, lag(1, tc.items))
			if d.Replicas != tc.want || d.Reason != tc.reason {
				t.Errorf("decision %d %q, want %d %q", d.Replicas, d.Reason, tc.want, tc.reason)
			}
		})
	}
}
