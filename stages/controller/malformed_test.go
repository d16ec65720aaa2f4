package controller_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller"
)

// TestUnreadableProgressIsDeadLetteredAndTheNextOneDecidedOn publishes
// every kind of unreadable message (bustest.Malformed) on a job's progress
// subject, then progress of a late job: each unreadable one is counted and
// kept as a dead letter holding its exact bytes, headers and subject, and
// the controller decides on the progress.
func TestUnreadableProgressIsDeadLetteredAndTheNextOneDecidedOn(t *testing.T) {
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	const job = "garbled"
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming,
		Replicas:   schemas.Replicas{Min: 1, Max: 10, Initial: 1},
		Controller: schemas.ControllerSpec{Name: "default", Params: json.RawMessage(`{"actuation_size": 2}`)}}); err != nil {
		t.Fatal(err)
	}
	decisions, err := c.Conn().SubscribeSync(c.Prefix().Decisions(job))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decisions.Unsubscribe() })
	st, err := controller.New(controller.Deps{Bus: c}, controller.Config{}, controller.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, st.Run)
	// Its consumer delivers new progress only: wait until it exists.
	bustest.Eventually(t, 20*time.Second, "the controller's consumer", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), controller.DefaultDurable)
		return err == nil
	})

	subject := c.Prefix().Metrics(job, schemas.ProgressMetrics)
	cases := bustest.PublishMalformed(t, c, subject, &schemas.Progress{Job: job, At: time.Now(), Error: -2, Replicas: 1, Total: 100})
	publishProgress(t, c, &schemas.Progress{Job: job, At: time.Now(), Error: -2, Replicas: 1, Total: 100})

	if d := nextDecision(t, decisions); d.Job != job || d.Replicas != 3 {
		t.Errorf("decision %+v, want %s scaled to 3", d, job)
	}
	bustest.WaitKept(t, c, job, cases)
	var m dto.Metric
	if err := st.Metrics().(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != float64(len(cases)) {
		t.Errorf("pace_controller_malformed_total = %v, want %d", got, len(cases))
	}
}
