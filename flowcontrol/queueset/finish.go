package queueset

import (
	"time"

	"github.com/pace-platform/pace/flowcontrol/work"
)

// finish ends r's initial phase and releases or schedules the release of its
// seats. It returns whether the queue set is idle afterwards.
func (qs *QueueSet) finish(r *Request) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if r.state != stateExecuting {
		panic("queueset: Finish on a request that is not executing")
	}
	qs.syncTimeLocked()
	now := qs.lastRealTime
	r.state = stateFinished
	qs.executing.remove(r)
	qs.totRequestsExecuting--
	if q := r.queue; q != nil {
		q.executing--
		if !q.active() {
			qs.activeQueues--
		}
		// Correct the guess G by the actual service time S.
		q.nextDispatchR -= work.SeatsTimesDuration(float64(r.est.InitialSeats), qs.g-now.Sub(r.startTime))
		qs.boundNextDispatchLocked(q)
	}
	if r.est.AdditionalLatency <= 0 {
		qs.releaseSeatsLocked(r)
	} else {
		qs.clock.EventAfterDuration(func(time.Time) { qs.releaseLingering(r) }, r.est.AdditionalLatency)
	}
	qs.dispatchAsMuchAsPossibleLocked()
	return qs.isIdleLocked()
}

func (qs *QueueSet) releaseLingering(r *Request) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.syncTimeLocked()
	qs.releaseSeatsLocked(r)
	qs.dispatchAsMuchAsPossibleLocked()
}

// releaseSeatsLocked returns r's seats and removes its queue if it is surplus
// and completely unused.
func (qs *QueueSet) releaseSeatsLocked(r *Request) {
	seats := r.est.MaxSeats()
	if r.cb.Released != nil {
		r.cb.Released(seats)
	}
	qs.totSeatsInUse -= seats
	qs.demand.Set(float64(qs.totSeatsInUse + qs.totSeatsWaiting))
	q := r.queue
	if q == nil {
		return
	}
	q.seatsInUse -= seats
	qs.queuedSeatsInUse -= seats
	if q.index >= 0 && len(qs.queues) > qs.cfg.Queues && !q.active() && q.seatsInUse == 0 {
		qs.removeQueueLocked(q)
	}
}

func (qs *QueueSet) removeQueueLocked(q *queue) {
	i := q.index
	qs.queues = append(qs.queues[:i], qs.queues[i+1:]...)
	for _, later := range qs.queues[i:] {
		later.index--
	}
	q.index = -1
	// keep (robinIndex+1) mod n pointing at the queue after the last one served
	if qs.robinIndex >= i {
		qs.robinIndex--
	}
}
