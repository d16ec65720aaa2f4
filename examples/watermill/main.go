// Command watermill is a custom actuator on Watermill's Router: it follows
// a job's scaling decisions (pace.decisions.<job>), applies each (here it
// only prints it; put your own scaling call in apply), and announces it as
// a scaled job event (pace.jobs.<job>.scaled), as Pace's gate does for the
// workers it runs. It suits a queue whose workers the user runs (a job
// created by `pace push`, which Pace never actuates). Run it against `pace
// up`, from the repository root:
//
//	go run ./examples/watermill --nats nats://127.0.0.1:4222 --job sdk
//
// It reads through a durable consumer, so a restart goes on where it
// stopped; a decision it cannot read is dead-lettered (pace dead-letters
// list). On a bus that authenticates, publishing job events needs the
// rights of Pace's stages.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/schemas"
)

func main() {
	defaultURL := "nats://127.0.0.1:4222"
	if v := os.Getenv("PACE_NATS_URL"); v != "" {
		defaultURL = v
	}
	url := flag.String("nats", defaultURL, "NATS URL printed by pace up (env PACE_NATS_URL)")
	job := flag.String("job", "sdk", "the job whose decisions to follow")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *job); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url, job string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := bus.Connect(ctx, url, bus.WithName("watermill-example"))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()

	const name = "watermill-example"
	p := c.Prefix()
	sub := pubsub.NewSubscriber(c.JetStream(), pubsub.Config{Durable: func(string) string { return name },
		Stream: func(string) string { return p.Stream(schemas.StreamDecisions) }}, logger)
	pub := pubsub.NewPublisher(c.JetStream(), logger)
	router, err := message.NewRouter(message.RouterConfig{}, pubsub.Logger(logger))
	if err != nil {
		return err
	}
	router.AddMiddleware(pubsub.SetAside(c, name))
	router.AddHandler(name, p.Decisions(job), sub, p.Jobs(job, schemas.EventScaled), pub,
		func(m *message.Message) ([]*message.Message, error) {
			d, err := pubsub.Decode[schemas.Decision](m)
			if err != nil {
				return nil, err // malformed: dead-lettered by SetAside
			}
			if err := apply(m.Context(), d); err != nil {
				return nil, err // nacked: delivered again
			}
			ev, err := pubsub.NewMessage(m.Context(), m.UUID+"/scaled", &schemas.JobEvent{Job: d.Job, Type: schemas.EventScaled,
				At: d.At, State: schemas.Ongoing, Replicas: d.Replicas, Reason: d.Reason})
			if err != nil {
				return nil, err
			}
			return []*message.Message{ev}, nil
		})
	go func() {
		<-ctx.Done()
		_ = router.Close()
	}()
	return router.Run(ctx)
}

// apply scales your workers to the decision's replicas.
func apply(_ context.Context, d *schemas.Decision) error {
	fmt.Printf("%s: %d → %d replicas (%s)\n", d.Job, d.Current, d.Replicas, d.Reason)
	return nil
}
