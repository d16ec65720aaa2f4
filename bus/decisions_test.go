package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// Decisions reads one job's decisions in order, then, following, the ones
// published after.
func TestDecisions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	decide := func(job string, replicas int) {
		t.Helper()
		d := &schemas.Decision{Job: job, At: t0.Add(time.Duration(replicas) * time.Second), Replicas: replicas, Reason: "test"}
		msg, err := bus.NewMsg(ctx, c.Prefix().Decisions(job), d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.JetStream().PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	decide("j", 1)
	decide("k", 7)
	decide("j", 2)

	var got []int
	for d, err := range c.Outputs().Decisions(ctx, "j", false) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Replicas)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("decisions of j = %v, want [1 2]", got)
	}

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan int)
	go func() {
		for d, err := range c.Outputs().Decisions(fctx, "j", true) {
			if err != nil {
				return
			}
			select {
			case seen <- d.Replicas:
			case <-fctx.Done():
			}
		}
		close(seen)
	}()
	for _, want := range []int{1, 2} {
		if r := <-seen; r != want {
			t.Fatalf("followed decision %d, want %d", r, want)
		}
	}
	decide("j", 3)
	if r := <-seen; r != 3 {
		t.Fatalf("new decision %d, want 3", r)
	}
	cancel()
	for range seen { // ends once ctx does
	}
}
