package collector

import (
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// TestLongestWait: a job whose counts stand still is sampled every 5
// minutes when quiet (nothing to do, or nobody to do it), every 30 s when
// workers hold or wait for its items, and with a deadline at least every
// hundredth of the time left to it.
func TestLongestWait(t *testing.T) {
	t.Parallel()
	c := &Stage{cfg: Config{Interval: time.Second}}
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	streaming := schemas.JobRecord{Spec: schemas.JobSpec{Mode: schemas.Streaming}, StartedAt: t0}
	due := func(after time.Duration) schemas.JobRecord {
		return schemas.JobRecord{Spec: schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{After: schemas.Duration(after)}}, StartedAt: t0}
	}
	for _, tc := range []struct {
		name   string
		rec    schemas.JobRecord
		counts sampleCounts
		at     time.Duration // after t0
		want   int
	}{
		{"streaming, empty queue", streaming, sampleCounts{repls: 1}, 0, 300},
		{"streaming, items but no worker", streaming, sampleCounts{pending: 5}, 0, 300},
		{"streaming, workers hold items", streaming, sampleCounts{inFlight: 2, repls: 2}, 0, 30},
		{"batch, nothing left to do", due(time.Hour), sampleCounts{done: 3, repls: 1}, 0, 300},
		{"batch, items but no worker", due(time.Hour), sampleCounts{pending: 3}, 0, 300},
		{"batch due in 24 h, a worker holds an item", due(24 * time.Hour), sampleCounts{pending: 2, inFlight: 1, repls: 1}, 0, 300},
		{"batch due in 2 h", due(2 * time.Hour), sampleCounts{pending: 2, repls: 1}, 0, 72},
		{"batch due in 2 h, 1 h 30 in", due(2 * time.Hour), sampleCounts{pending: 2, repls: 1}, 90 * time.Minute, 30},
		{"batch past its deadline", due(time.Minute), sampleCounts{pending: 2, repls: 1}, time.Hour, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.longestWait(&tc.rec, tc.counts, t0.Add(tc.at)); got != tc.want {
				t.Errorf("longestWait = %d rounds, want %d", got, tc.want)
			}
		})
	}
}
