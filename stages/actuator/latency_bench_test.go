package actuator_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
	"github.com/pace-platform/pace/stages/controller"
)

// BenchmarkProgressToRequest measures the control loop's reaction time: from
// a progress message to the infrastructure request it causes, through the
// controller stage (Asperathos' default scheduler, which flips between two
// replica counts as the error changes sign) and the actuator stage.
func BenchmarkProgressToRequest(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	c := bustest.Client(b, bustest.Server(b))
	ctx := context.Background()
	params, _ := json.Marshal(map[string]any{"trigger_up": 0, "trigger_down": 0, "actuation_size": 1, "min_rep": 1, "max_rep": 2})
	if _, err := c.DeclareJob(ctx, "lat", schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"},
		Controller: schemas.ControllerSpec{Name: "default", Params: params}}); err != nil {
		b.Fatal(err)
	}
	requests := make(chan time.Time, 16)
	sub, err := c.Conn().Subscribe(c.Prefix().KubeRequests(), func(*nats.Msg) { requests <- time.Now() })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	ctl, err := controller.New(controller.Deps{Bus: c}, controller.Config{}, controller.WithLogger(log))
	if err != nil {
		b.Fatal(err)
	}
	bustest.Run(b, ctl.Run)
	bustest.Run(b, newActuator(b, c, actuator.WithLogger(log)).Run)
	select { // the reconcile at start asks for the initial replica
	case <-requests:
	case <-time.After(bustest.MinWait):
		b.Fatal("no reconcile request")
	}

	latencies := make([]time.Duration, 0, b.N)
	t0 := time.Now()
	replicas := 1
	b.ResetTimer()
	for i := range b.N {
		errSign := -1.0 // late: scale up to 2
		if replicas == 2 {
			errSign = 1 // early: scale down to 1
		}
		sent := time.Now()
		bustest.Publish(b, c, c.Prefix().Metrics("lat", schemas.ProgressMetrics), &schemas.Progress{
			Job: "lat", At: t0.Add(time.Duration(i+1) * time.Second), Replicas: replicas, Error: errSign,
			JobProgress: 0.5, TimeProgress: 0.5 - errSign})
		select {
		case at := <-requests:
			latencies = append(latencies, at.Sub(sent))
		case <-time.After(bustest.MinWait):
			b.Fatalf("no request for progress %d", i)
		}
		replicas = 3 - replicas
	}
	b.StopTimer()
	slices.Sort(latencies)
	q := func(f float64) float64 {
		return float64(latencies[int(f*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
