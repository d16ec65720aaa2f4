package queueset

import (
	"context"
	"time"

	"github.com/pace-platform/pace/flowcontrol/work"
)

type requestState uint8

const (
	stateWaiting   requestState = iota // in a queue
	stateExecuting                     // initial phase
	stateFinished                      // Finish called; final seats may still linger
	stateCancelled                     // withdrawn from its queue
)

// Request is one admitted request: waiting in a queue or executing. Its
// methods are safe for concurrent use, but Finish must be called once, and
// only after the request was dispatched.
type Request struct {
	qs         *QueueSet
	queue      *queue // nil when dispatched without queuing
	flowSchema string
	label      string
	cb         Callbacks
	ready      chan struct{} // closed at dispatch when someone may block in Wait

	// guarded by qs.mu
	est         work.Completed
	state       requestState
	waitSeats   int // seats counted in totSeatsWaiting while waiting
	arrivalR    work.SeatSeconds
	arrivalTime time.Time
	startTime   time.Time
	prev, next  *Request
	list        *requestList
}

// Wait blocks until the request is dispatched or ctx ends. If ctx ends first
// the request is withdrawn as TimeOut and Wait returns false. A request that
// was dispatched just as ctx ended is reported as dispatched.
func (r *Request) Wait(ctx context.Context) bool {
	r.qs.mu.Lock()
	state, ready := r.state, r.ready
	r.qs.mu.Unlock()
	switch {
	case state == stateCancelled:
		return false
	case state != stateWaiting:
		return true
	case ready == nil:
		panic("queueset: Wait on a request started with a Dispatched callback")
	}
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return !r.Cancel()
	}
}

// Cancel withdraws a waiting request, counting it as TimeOut, and reports
// whether it did; a request already dispatched is left alone.
func (r *Request) Cancel() bool {
	qs := r.qs
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if r.state != stateWaiting {
		return false
	}
	qs.syncTimeLocked()
	q := r.queue
	q.withdraw(r)
	r.state = stateCancelled
	qs.totRequestsWaiting--
	qs.totSeatsWaiting -= r.waitSeats
	qs.notifyLocked(Withdrawn, r, 0)
	qs.rejected++
	qs.timedOut++
	if !q.active() {
		qs.activeQueues--
	}
	qs.boundNextDispatchLocked(q)
	qs.demand.Set(float64(qs.totSeatsInUse + qs.totSeatsWaiting))
	// Like upstream, no dispatch here: the next arrival or finish does it.
	return true
}

// Finish runs fn (which may be nil) and then ends the request's execution,
// also when fn panics. Final seats are released after AdditionalLatency by
// the clock. It returns whether the queue set is then idle.
func (r *Request) Finish(fn func()) (idle bool) {
	defer func() { idle = r.qs.finish(r) }()
	if fn != nil {
		fn()
	}
	return false
}

// Estimate returns the request's work estimate, after any final-seat clamp.
func (r *Request) Estimate() work.Estimate {
	r.qs.mu.Lock()
	defer r.qs.mu.Unlock()
	return r.est.Estimate
}
