// Command sdk pushes words to a job, uppercases them with an SDK worker and
// prints the results. Run it against `pace up`:
//
//	go run ./examples/sdk -nats nats://127.0.0.1:4222
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

func main() {
	url := flag.String("nats", "nats://127.0.0.1:4222", "NATS URL printed by pace up")
	job := flag.String("job", "shout", "job name")
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
	for r, err := range c.Results(ctx, *job) {
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
