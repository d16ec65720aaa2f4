package processor

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// TestIdleTrackersEvicted checks that a job that stops sending samples
// without a final one (deleted mid-run) does not keep its tracker forever,
// while a finished job's tracker goes at once.
func TestIdleTrackersEvicted(t *testing.T) {
	s := &Stage{cfg: Config{}.Defaults(), metrics: NewMetrics(), trackers: map[string]*Tracker{}}
	ctx := context.Background()
	if _, err := s.Process(ctx, &schemas.Sample{Job: "gone", At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Process(ctx, &schemas.Sample{Job: "done", At: t0, State: schemas.Completed}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.trackers["done"]; ok {
		t.Error("tracker of a finished job kept")
	}
	at := t0.Add(idleTracker + time.Second)
	for i := range 4096 {
		if _, err := s.Process(ctx, &schemas.Sample{Job: "busy", At: at.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.trackers["gone"]; ok {
		t.Error("tracker idle for more than an hour kept")
	}
	if _, ok := s.trackers["busy"]; !ok {
		t.Error("tracker of a busy job evicted")
	}
}
