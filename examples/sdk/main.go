// Command sdk pushes words to a job, uppercases them with an SDK worker and
// prints the results. Run it against `pace up`, from the repository root:
//
//	go run ./examples/sdk --nats nats://127.0.0.1:4222 --job sdk
//
// --nats defaults to $PACE_NATS_URL, as for the pace commands.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

func main() {
	defaultURL := "nats://127.0.0.1:4222"
	if v := os.Getenv("PACE_NATS_URL"); v != "" {
		defaultURL = v
	}
	url := flag.String("nats", defaultURL, "NATS URL printed by pace up (env PACE_NATS_URL)")
	job := flag.String("job", "sdk", "job name; a job that does not exist is created as a streaming job")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	c, err := bus.Connect(ctx, *url, bus.WithName("sdk-example"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()

	if err := c.PushItems(ctx, *job, bus.Items("hello", "from", "the", "sdk")); err != nil {
		log.Fatal(err)
	}
	w, err := c.Worker(*job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return strings.ToUpper(it.Payload), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for r, err := range c.Outputs().Results(ctx, *job) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s -> %s\n", r.ItemID, r.Output)
	}
	stopWorker()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
}
