package manager_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/work"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// TestCountJobs: the manager API's job count reaches the work estimator's
// object counts, with the records' average JSON size.
func TestCountJobs(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	ctx, cancel := context.WithCancel(context.Background())
	var size int64
	for _, id := range []string{"a", "bb", "ccc"} {
		rec, err := c.Jobs().Update(ctx, id, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
			return &schemas.JobRecord{ID: id, State: schemas.Ongoing, CreatedAt: time.Unix(0, 0)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rec)
		size += int64(len(b))
	}
	counts := apf.NewObjectCounts()
	if _, err := counts.ObjectStats(apfhttp.PaceGroup, "submissions"); err == nil {
		t.Fatal("a count before counting")
	}
	done := make(chan error, 1)
	go func() { done <- manager.CountJobs(c, counts, slog.New(slog.DiscardHandler))(ctx) }()
	want := work.Stats{ObjectCount: 3, AverageObjectSizeBytes: size / 3}
	bustest.Eventually(t, 10*time.Second, "3 jobs counted", func() bool {
		s, err := counts.ObjectStats(apfhttp.PaceGroup, "submissions")
		return err == nil && s == want
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("loop returned %v, want nil on cancel", err)
	}
}
