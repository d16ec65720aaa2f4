package eventclock

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Interface is all the APF engine needs from time.
type Interface interface {
	Now() time.Time
	// EventAfterDuration runs f once d has passed, with the time it ran.
	EventAfterDuration(f func(now time.Time), d time.Duration)
}

// Real is an Interface backed by a k8s.io/utils clock, normally clock.RealClock{}.
type Real struct {
	clock.WithDelayedExecution
}

// EventAfterDuration runs f in its own goroutine after d.
func (r Real) EventAfterDuration(f func(now time.Time), d time.Duration) {
	r.AfterFunc(d, func() { f(r.Now()) })
}

// Every calls f every d of clk's time, on the caller's goroutine, until ctx
// ends. Ticks that come while f runs are coalesced into one.
func Every(ctx context.Context, clk Interface, d time.Duration, f func()) {
	tick := make(chan struct{}, 1)
	var schedule func(time.Time)
	schedule = func(time.Time) {
		select {
		case tick <- struct{}{}:
		default:
		}
		if ctx.Err() == nil {
			clk.EventAfterDuration(schedule, d)
		}
	}
	clk.EventAfterDuration(schedule, d)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			f()
		}
	}
}
