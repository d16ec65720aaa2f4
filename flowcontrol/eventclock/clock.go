package eventclock

import (
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
