package bus_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// This example starts an embedded server, pushes three items, processes them
// with a worker and reads the results. Against `pace up`, connect with
// bus.Connect(ctx, "nats://127.0.0.1:4222") instead.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "pace-example")
	defer os.RemoveAll(dir)
	srv, err := bus.StartServer(bus.ServerConfig{DataDir: dir}, nil)
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	c, err := bus.Connect(ctx, "", bus.WithServer(srv))
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		panic(err)
	}

	// Push: a job that does not exist yet is created as a streaming job.
	if err := c.PushItems(ctx, "shout", bus.Items("hello", "pace", "world")); err != nil {
		panic(err)
	}

	// Work: the handler's return value becomes the item's only result.
	w, err := c.Worker("shout", func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return strings.ToUpper(it.Payload), nil
	}, bus.WithConcurrency(2))
	if err != nil {
		panic(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- w.Run(wctx) }()

	// Results: ends once the job has nothing waiting or in progress.
	var out []string
	for r, err := range c.Outputs().Results(ctx, "shout") {
		if err != nil {
			panic(err)
		}
		out = append(out, r.Output)
	}
	stop()
	<-done
	slices.Sort(out)
	fmt.Println(out)
	// Output: [HELLO PACE WORLD]
}
