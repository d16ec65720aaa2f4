package bus

import (
	"context"
	"time"
)

// pause is an exponential wait between retries of a failing loop step.
type pause struct {
	min, max, next time.Duration
}

func newPause(min, max time.Duration) *pause { return &pause{min: min, max: max, next: min} }

// wait sleeps for the next delay or until ctx ends, then doubles the delay.
func (p *pause) wait(ctx context.Context) {
	t := time.NewTimer(p.next)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	p.next = min(2*p.next, p.max)
}

// reset returns the delay to its minimum after a success.
func (p *pause) reset() { p.next = p.min }
