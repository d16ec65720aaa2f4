package queueset

import (
	"fmt"
	"math"
	"time"

	"github.com/pace-platform/pace/flowcontrol/work"
)

// dispatchAsMuchAsPossibleLocked dispatches until nothing waits, all seats are
// taken, or the next head does not fit.
func (qs *QueueSet) dispatchAsMuchAsPossibleLocked() {
	for qs.totRequestsWaiting != 0 && qs.totSeatsInUse < qs.limit && qs.dispatchLocked() {
	}
}

// dispatchLocked dispatches the head with the earliest virtual finish, if it
// fits, and reports whether it did.
func (qs *QueueSet) dispatchLocked() bool {
	q := qs.findDispatchQueueLocked()
	if q == nil {
		return false
	}
	r := q.waiting.head
	qs.lastDispatch.R, qs.lastDispatch.S = qs.currentR, q.nextDispatchR
	q.withdraw(r)
	qs.totRequestsWaiting--
	qs.totSeatsWaiting -= r.waitSeats // the seats added at enqueue, clamp or not
	qs.notifyLocked(Dispatched, r, 0)
	r.est.ClampFinalSeats(qs.limit)
	now := qs.clock.Now()
	qs.startLocked(r, now)
	q.executing++
	q.seatsInUse += r.est.MaxSeats()
	qs.queuedSeatsInUse += r.est.MaxSeats()
	q.nextDispatchR += r.est.TotalWork()
	qs.boundNextDispatchLocked(q)
	qs.demand.Set(float64(qs.totSeatsInUse + qs.totSeatsWaiting))
	return true
}

// startLocked moves r to the executing state and notifies its waiter.
func (qs *QueueSet) startLocked(r *Request, now time.Time) {
	r.state = stateExecuting
	r.startTime = now
	qs.executing.pushBack(r)
	qs.totRequestsExecuting++
	qs.totSeatsInUse += r.est.MaxSeats()
	qs.dispatched++
	if qs.cfg.Queues >= 0 && qs.totSeatsInUse > qs.limit && qs.totRequestsExecuting > 1 && qs.violation == nil {
		qs.violation = fmt.Errorf("dispatch at %v raised seats in use to %d over the limit %d with %d executing",
			now, qs.totSeatsInUse, qs.limit, qs.totRequestsExecuting)
	}
	switch {
	case r.cb.Dispatched != nil:
		r.cb.Dispatched(r)
	case r.ready != nil:
		close(r.ready)
	}
}

// findDispatchQueueLocked scans the queues round-robin from the one after the
// last dispatch and returns the queue whose head has the strictly smallest
// virtual finish, or nil if that head cannot be accommodated now (head-of-line
// blocking: no other head is considered; the miss is counted by the head's
// flow schema, as kube's request_dispatch_no_accommodation_total). On
// success robinIndex moves to it
// and the bounds of the scan are recorded in lastDispatch (R and S by the
// caller).
func (qs *QueueSet) findDispatchQueueLocked() *queue {
	n := len(qs.queues)
	start := qs.robinIndex
	best, bestIdx := (*queue)(nil), -1
	bestFinish := work.MaxSeatSeconds
	// bounds of S and of S − seatsInUse×G over the queues with a head, in units
	sMin, sMax := work.MaxSeatSeconds, work.SeatSeconds(0)
	dMin, dMax := math.Inf(1), math.Inf(-1)
	for i := 1; i <= n; i++ {
		idx := (start + i) % n
		if idx < 0 {
			idx += n
		}
		q := qs.queues[idx]
		if h := q.waiting.head; h != nil {
			s := q.nextDispatchR
			d := float64(s) - float64(work.SeatSeconds(q.seatsInUse)*qs.seatG)
			sMin, sMax, dMin, dMax = min(sMin, s), max(sMax, s), min(dMin, d), max(dMax, d)
			if f := s + h.est.TotalWork(); f < bestFinish {
				best, bestIdx, bestFinish = q, idx, f
			}
		}
	}
	// upstream's scan leaves robinIndex at start mod n, turning −1 into n−1
	qs.robinIndex = ((start % n) + n) % n
	if best == nil {
		return nil
	}
	if h := best.waiting.head; !qs.canAccommodateLocked(h.est.MaxSeats()) {
		if qs.noAccommodation == nil {
			qs.noAccommodation = map[string]int{}
		}
		qs.noAccommodation[h.flowSchema]++
		return nil
	}
	qs.robinIndex = bestIdx
	unit := work.SeatSeconds(1).Float()
	qs.lastDispatch = DispatchDump{Dispatches: qs.lastDispatch.Dispatches + 1, SMin: sMin, SMax: sMax,
		DiscountedSMin: dMin * unit, DiscountedSMax: dMax * unit}
	return best
}

// canAccommodateLocked reports whether a request of the given width may start now.
func (qs *QueueSet) canAccommodateLocked(seats int) bool {
	switch {
	case qs.cfg.Queues < 0:
		return true
	case seats > qs.limit:
		// Too wide: it runs alone. Unlike upstream, a zero limit admits nothing.
		return qs.limit > 0 && qs.totRequestsExecuting == 0
	}
	return qs.totSeatsInUse+seats <= qs.limit
}
