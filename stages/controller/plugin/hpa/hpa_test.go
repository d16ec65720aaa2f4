package hpa_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/hpa"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRecordedSequence(t *testing.T) {
	c, err := hpa.New(plugin.Job{Name: "j", Min: 1, Max: 20, Initial: 1}, json.RawMessage(`{"scale_down_window": "30s"}`))
	if err != nil {
		t.Fatal(err)
	}
	// 0: ceil(100/10) = 10, limited to max(1+4, 2·1) = 5; 5: still limited (1 was in
	// effect 15 s ago); 15: max(5+4, 2·5) = 10; 20: 105/(10·10) is within tolerance
	// 0.1; 25: 4 recommended but the 30 s down window holds the earlier 10; 60: only
	// 4 in the window; 70: max(4, 0) = 4; 100: 0 clamped to min 1; 101: the count in
	// effect 15 s ago was 4, so up to max(4+4, 2·4) = 8.
	want := []int{5, 5, 10, 10, 10, 4, 4, 1, 8}
	var got []int
	for _, s := range []struct{ sec, lag int }{{0, 100}, {5, 100}, {15, 100}, {20, 105}, {25, 40}, {60, 40}, {70, 0}, {100, 0}, {101, 400}} {
		d, err := c.Decide(schemas.Progress{Job: "j", At: t0.Add(time.Duration(s.sec) * time.Second), QueueLength: s.lag})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Replicas)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
}
