package eventclock_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/flowcontrol/eventclock"
)

func TestEveryFollowsTheClock(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		eventclock.Every(ctx, clk, time.Second, func() {
			select { // after the cancel, a last tick may still win Every's select
			case calls <- struct{}{}:
			case <-ctx.Done():
			}
		})
	}()
	for deadline := time.Now().Add(2 * time.Minute); clk.Pending() == 0; { // Every has scheduled its first tick
		if time.Now().After(deadline) {
			t.Fatal("Every scheduled nothing")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 3 {
		clk.Step(time.Second) // time moves only when the test says so
		select {
		case <-calls:
		case <-time.After(2 * time.Minute):
			t.Fatalf("no call after step %d", i+1)
		}
	}
	cancel()
	clk.Step(time.Second) // the pending event sees the cancel and stops rescheduling
	<-done
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d events still scheduled after cancel, want 0", n)
	}
}
