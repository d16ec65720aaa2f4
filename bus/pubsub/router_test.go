package pubsub_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/schemas"
)

// TestRouterFollowsDecisionsAndPublishesJobEvents runs a service on
// Watermill's Router over Pace's provisioned bus: it follows a job's
// decisions and announces each as a scaled job event. A decision whose
// handler fails once is delivered again (a nack) and announced once; each
// event continues its decision's correlation; the JetStream metadata is in
// reach of the handler; a malformed decision is dead-lettered and not
// delivered again.
func TestRouterFollowsDecisionsAndPublishesJobEvents(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	c := bustest.Client(t, bustest.Server(t))
	const job = "render"
	p := c.Prefix()

	events := make(chan *nats.Msg, 16)
	dead := make(chan *nats.Msg, 4)
	for subject, ch := range map[string]chan *nats.Msg{p.Jobs(job, schemas.EventScaled): events, p.Metrics(job, schemas.DeadMetrics): dead} {
		sub, err := c.Conn().ChanSubscribe(subject, ch)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}

	var mu sync.Mutex
	deliveries := map[int]uint64{} // replicas → deliveries of their decision
	failed := false
	sub := pubsub.NewSubscriber(c.JetStream(), pubsub.Config{Durable: func(string) string { return "example-scaler" },
		Stream: func(string) string { return p.Stream(schemas.StreamDecisions) }, NakDelay: 50 * time.Millisecond}, log)
	pub := pubsub.NewPublisher(c.JetStream(), log)
	router, err := message.NewRouter(message.RouterConfig{}, pubsub.Logger(log))
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(pubsub.SetAside(c, "example-scaler"))
	router.AddHandler("scaler", p.Decisions(job), sub, p.Jobs(job, schemas.EventScaled), pub,
		func(m *message.Message) ([]*message.Message, error) {
			d, err := pubsub.Decode[schemas.Decision](m)
			if err != nil {
				return nil, err
			}
			md, err := pubsub.Metadata(m)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			deliveries[d.Replicas] = md.NumDelivered
			failOnce := d.Replicas == 3 && !failed
			failed = failed || failOnce
			mu.Unlock()
			if failOnce {
				return nil, errors.New("the cluster is busy")
			}
			ev, err := pubsub.NewMessage(m.Context(), m.UUID+"/scaled", &schemas.JobEvent{Job: d.Job, Type: schemas.EventScaled,
				At: d.At, State: schemas.Ongoing, Replicas: d.Replicas, Reason: "applied: " + d.Reason})
			if err != nil {
				return nil, err
			}
			return []*message.Message{ev}, nil
		})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- router.Run(rctx) }()
	t.Cleanup(func() {
		_ = router.Close()
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-router.Running()

	for i, replicas := range []int{2, 3, 5} {
		cctx := bus.WithCorrelationID(ctx, "decision-"+string(rune('a'+i)))
		msg, err := bus.NewMsg(cctx, p.Decisions(job), &schemas.Decision{Job: job, At: time.Now(), Replicas: replicas, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.JetStream().PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	const malformed = `{"job": "render", "replicas": "many"}`
	if _, err := c.JetStream().Publish(ctx, p.Decisions(job), []byte(malformed)); err != nil {
		t.Fatal(err)
	}

	for i, want := range []int{2, 3, 5} {
		select {
		case m := <-events:
			ev, err := bus.Decode[schemas.JobEvent](m.Data, m.Header)
			if err != nil {
				t.Fatal(err)
			}
			corr := "decision-" + string(rune('a'+i))
			if ev.Replicas != want || m.Header.Get(schemas.HeaderCorrelationID) != corr {
				t.Errorf("event %d: replicas %d, correlation %q; want %d, %q", i, ev.Replicas, m.Header.Get(schemas.HeaderCorrelationID), want, corr)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no scaled event for replicas %d", want)
		}
	}
	select {
	case m := <-dead:
		d, err := bus.Decode[schemas.DeadLetter](m.Data, m.Header)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != schemas.Malformed || d.Subject != p.Decisions(job) || string(d.Raw) != malformed {
			t.Errorf("dead letter: reason %s, subject %q, body %q; want the malformed decision", d.Reason, d.Subject, d.Raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the malformed decision was not dead-lettered")
	}
	select {
	case m := <-events:
		t.Errorf("a second event: %s", m.Data)
	case <-time.After(500 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	if deliveries[2] != 1 || deliveries[3] != 2 || deliveries[5] != 1 {
		t.Errorf("deliveries by replicas: %v, want the decision that failed once delivered twice", deliveries)
	}
}
