package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller"
)

// BenchmarkDecisionLatency measures the time from publishing a progress
// message to receiving the decision (deadline controller, state saved in KV
// before the ack), on an embedded server; it reports the p50 and p99.
func BenchmarkDecisionLatency(b *testing.B) {
	c := bustest.Client(b, bustest.Server(b))
	ctx := context.Background()
	const job = "bench"
	_, err := c.Jobs().Update(ctx, job, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
		spec := schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{After: schemas.Duration(time.Hour)},
			Replicas: schemas.Replicas{Min: 1, Max: 10, Initial: 1}, Controller: schemas.ControllerSpec{Params: json.RawMessage(`{"prior_rate": 1}`)}}
		return &schemas.JobRecord{ID: job, Spec: spec, State: schemas.Ongoing, CreatedAt: t0, StartedAt: t0}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	sub, err := c.Conn().SubscribeSync(c.Prefix().Decisions(job))
	if err != nil {
		b.Fatal(err)
	}
	stop := runStageWith(b, c, controller.Config{Heartbeat: -1}) // every decision, changed or not
	defer stop()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		p := &schemas.Progress{Job: job, At: t0.Add(time.Duration(i+1) * time.Second), Replicas: 1, InFlight: 1,
			Total: 1 << 30, Done: i, QueueLength: 1 << 20, TimeProgress: float64(i+1) / 3600}
		start := time.Now()
		publishProgress(b, c, p)
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}
