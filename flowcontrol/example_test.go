package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
)

func Example() {
	clk := eventclock.NewFake(time.Unix(0, 0)) // in production: eventclock.Real{WithDelayedExecution: clock.RealClock{}}
	ctl, err := flowcontrol.New(clk, flowcontrol.Config{ServerConcurrencyLimit: 10, Levels: []flowcontrol.PriorityLevel{
		{Name: "workload", NominalConcurrencyShares: 100, Queues: 64, HandSize: 6, QueueLengthLimit: 50},
	}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := ctl.WithWaitLimit(context.Background())
	defer cancel()
	hash := flowcontrol.HashFlow("service-accounts", "alice")
	req, err := ctl.StartRequest(ctx, flowcontrol.WorkEstimate{InitialSeats: 1}, hash, "service-accounts", "workload", "alice", flowcontrol.Callbacks{})
	var rejected *flowcontrol.RejectedError
	if errors.As(err, &rejected) {
		fmt.Println("429, retry after", rejected.RetryAfter)
		return
	}
	idle := req.Finish(func() { fmt.Println("serving alice") })
	fmt.Println("idle:", idle)
	// Output:
	// serving alice
	// idle: true
}
