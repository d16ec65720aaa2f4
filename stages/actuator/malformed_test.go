package actuator_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestUnreadableDecisionIsDeadLetteredAndTheNextOneActedOn publishes every
// kind of unreadable message (bustest.Malformed), then a decision: each
// unreadable one becomes a dead letter holding its exact bytes, headers and
// subject, and the actuator goes on to request the decision.
func TestUnreadableDecisionIsDeadLetteredAndTheNextOneActedOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	const job = "garbled"
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"}}); err != nil {
		t.Fatal(err)
	}
	requests := make(chan *schemas.KubeRequest, 8)
	sub, err := c.Conn().Subscribe(c.Prefix().KubeRequests(), func(m *nats.Msg) {
		if r, err := bus.Decode[schemas.KubeRequest](m.Data, m.Header); err == nil {
			requests <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	bustest.Run(t, newActuator(t, c).Run)
	// Its decision consumer starts from the last decision per subject: wait
	// until it exists, so both messages below reach it.
	bustest.Eventually(t, 20*time.Second, "the actuator's decision consumer", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamDecisions), "pace-actuator")
		return err == nil
	})

	subject := c.Prefix().Decisions(job)
	cases := bustest.PublishMalformed(t, c, subject, &schemas.Decision{Job: job, At: time.Now(), Replicas: 2, Reason: "valid"})
	bustest.Publish(t, c, subject, &schemas.Decision{Job: job, At: time.Now(), Replicas: 3, Reason: "after garbage"})

	waitRequest(t, requests, job, 3)
	bustest.WaitKept(t, c, job, cases)
}

// waitRequest waits for a request to scale job to replicas.
func waitRequest(t *testing.T, requests <-chan *schemas.KubeRequest, job string, replicas int) {
	t.Helper()
	timeout := time.After(bustest.MinWait)
	for {
		select {
		case r := <-requests:
			if r.Job == job && r.Replicas == replicas {
				return
			}
		case <-timeout:
			t.Fatalf("no request to scale %s to %d", job, replicas)
		}
	}
}
