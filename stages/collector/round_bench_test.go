package collector

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// benchJobs opens n streaming jobs with a few items queued and results stored.
func benchJobs(b *testing.B, c *bus.Client, n int) []*schemas.JobRecord {
	b.Helper()
	ctx := context.Background()
	recs := make([]*schemas.JobRecord, n)
	for i := range n {
		id := fmt.Sprintf("job-%04d", i)
		rec, err := c.OpenJob(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.PushItems(ctx, id, bus.Items("a", "b", "c")); err != nil {
			b.Fatal(err)
		}
		if err := c.PublishResult(ctx, &schemas.Result{Job: id, ItemID: "r1", Output: "ok"}); err != nil {
			b.Fatal(err)
		}
		recs[i] = rec
	}
	return recs
}

// BenchmarkRound samples 1,000 running jobs per round (the target:
// 1,000 jobs per second of interval, one collector). The first round, which
// creates the 2,000 counting consumers, is timed separately and reported
// with the heap the server grew by.
func BenchmarkRound(b *testing.B) {
	for _, tc := range []struct {
		mode schemas.JobMode
		ttl  time.Duration
	}{{schemas.Batch, 0}, {schemas.Streaming, 0}, {schemas.Batch, -1}} {
		const n = 1000
		mode := tc.mode
		ttl := "1h"
		if tc.ttl < 0 {
			ttl = "none"
		}
		b.Run(fmt.Sprintf("jobs=%d/mode=%s/raw-ttl=%s", n, mode, ttl), func(b *testing.B) {
			c := bustest.Client(b, bustest.Server(b), bus.WithName("bench"))
			recs := benchJobs(b, c, n)
			col, err := New(Deps{Bus: c}, Config{RawTTL: tc.ttl})
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range recs {
				j := &job{rec: *r}
				j.rec.Spec.Mode = mode // streaming jobs with a backlog cost one more request (the oldest item)
				col.jobs[r.ID] = j
			}
			ctx, cancel := context.WithCancel(context.Background())
			wait := col.startWorkers(ctx)
			defer func() { cancel(); wait() }()
			round := func() {
				col.startRound(ctx)
				col.mu.Lock()
				done := col.roundDone
				col.mu.Unlock()
				<-done
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			round()
			first := time.Since(start)
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.Logf("first round (creates %d counting consumers): %s; heap (client and server) grew by %.1f MiB",
				n, first.Round(time.Millisecond), float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20))
			b.ResetTimer()
			for b.Loop() {
				round()
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(per.Seconds()*1000, "round-ms")
			b.ReportMetric(float64(n)/per.Seconds(), "jobs/s")
		})
	}
}
