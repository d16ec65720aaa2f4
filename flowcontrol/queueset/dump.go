package queueset

import (
	"fmt"
	"maps"
	"time"

	"github.com/pace-platform/pace/flowcontrol/work"
)

// Dump is a consistent snapshot of a queue set for debugging.
type Dump struct {
	Name                string           `json:"name"`
	ConcurrencyLimit    int              `json:"concurrencyLimit"`
	CurrentR            work.SeatSeconds `json:"currentR"`
	RobinIndex          int              `json:"robinIndex"`
	Queues              []QueueDump      `json:"queues,omitempty"`
	QueuelessExecuting  []RequestDump    `json:"queuelessExecuting,omitempty"`
	Waiting             int              `json:"waiting"`
	Executing           int              `json:"executing"`
	SeatsInUse          int              `json:"seatsInUse"`
	SeatsWaiting        int              `json:"seatsWaiting"`
	Dispatched          int              `json:"dispatched"`
	Rejected            int              `json:"rejected"`
	TimedOut            int              `json:"timedOut"`
	EpochAdvances       int              `json:"epochAdvances"`
	EpochAdvanceFailure int              `json:"epochAdvanceFailures"`
	// LastDispatch describes the last dispatch from a queue; its Dispatches
	// is 0 before the first one (levels without queues never have one).
	LastDispatch DispatchDump `json:"lastDispatch"`
	// NoAccommodation counts, by flow schema, the dispatch attempts whose
	// chosen head did not fit in the free seats.
	NoAccommodation map[string]int `json:"noAccommodation,omitempty"`
}

// DispatchDump is virtual time as seen by the last dispatch from a queue:
// kube-apiserver's dispatch_r, latest_s, next_s_bounds and
// next_discounted_s_bounds gauges, which it sets at every such dispatch.
type DispatchDump struct {
	// Dispatches counts the dispatches from queues.
	Dispatches int `json:"dispatches"`
	// R is the progress meter at the dispatch.
	R work.SeatSeconds `json:"r"`
	// S is the nextDispatchR of the queue dispatched from, before the
	// request's work was added: the request's virtual start.
	S work.SeatSeconds `json:"s"`
	// SMin and SMax bound nextDispatchR over the queues that had a request
	// waiting when the dispatch scanned them.
	SMin work.SeatSeconds `json:"sMin"`
	SMax work.SeatSeconds `json:"sMax"`
	// DiscountedSMin and DiscountedSMax bound nextDispatchR − seatsInUse×G
	// over the same queues, in seat-seconds. They may be negative, where
	// kube's unsigned arithmetic wraps around.
	DiscountedSMin float64 `json:"discountedSMin"`
	DiscountedSMax float64 `json:"discountedSMax"`
}

// QueueDump describes one queue.
type QueueDump struct {
	Index           int              `json:"index"`
	NextDispatchR   work.SeatSeconds `json:"nextDispatchR"`
	Waiting         []RequestDump    `json:"waiting,omitempty"`
	Executing       []RequestDump    `json:"executing,omitempty"`
	SeatsInUse      int              `json:"seatsInUse"`
	InitialSeatsSum int              `json:"initialSeatsSum"`
	MaxSeatsSum     int              `json:"maxSeatsSum"`
	TotalWorkSum    work.SeatSeconds `json:"totalWorkSum"`
}

// RequestDump describes one request.
type RequestDump struct {
	FlowSchema  string        `json:"flowSchema"`
	Label       string        `json:"label"`
	Estimate    work.Estimate `json:"estimate"`
	ArrivalTime time.Time     `json:"arrivalTime"`
	StartTime   time.Time     `json:"startTime,omitzero"`
}

// Dump returns a snapshot. It does not advance virtual time.
func (qs *QueueSet) Dump() Dump {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	d := Dump{
		Name: qs.cfg.Name, ConcurrencyLimit: qs.limit, CurrentR: qs.currentR, RobinIndex: qs.robinIndex,
		Waiting: qs.totRequestsWaiting, Executing: qs.totRequestsExecuting,
		SeatsInUse: qs.totSeatsInUse, SeatsWaiting: qs.totSeatsWaiting,
		Dispatched: qs.dispatched, Rejected: qs.rejected, TimedOut: qs.timedOut,
		EpochAdvances: qs.epochAdvances, EpochAdvanceFailure: qs.epochFailures, LastDispatch: qs.lastDispatch,
		NoAccommodation: maps.Clone(qs.noAccommodation),
	}
	for _, q := range qs.queues {
		qd := QueueDump{Index: q.index, NextDispatchR: q.nextDispatchR, SeatsInUse: q.seatsInUse,
			InitialSeatsSum: q.initialSeatsSum, MaxSeatsSum: q.maxSeatsSum, TotalWorkSum: q.totalWorkSum}
		for r := q.waiting.head; r != nil; r = r.next {
			qd.Waiting = append(qd.Waiting, r.dump())
		}
		d.Queues = append(d.Queues, qd)
	}
	for r := qs.executing.head; r != nil; r = r.next {
		if r.queue == nil {
			d.QueuelessExecuting = append(d.QueuelessExecuting, r.dump())
		} else if r.queue.index >= 0 {
			d.Queues[r.queue.index].Executing = append(d.Queues[r.queue.index].Executing, r.dump())
		}
	}
	return d
}

func (r *Request) dump() RequestDump {
	return RequestDump{FlowSchema: r.flowSchema, Label: r.label, Estimate: r.est.Estimate,
		ArrivalTime: r.arrivalTime, StartTime: r.startTime}
}

// CheckInvariants verifies the bookkeeping (see the package comment) and
// returns the first violation found, or nil. Tests call it after every step.
func (qs *QueueSet) CheckInvariants() error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.violation != nil {
		return qs.violation
	}
	var waiting, seatsWaiting, queuedSeats, active int
	for i, q := range qs.queues {
		if q.index != i {
			return fmt.Errorf("queue at %d has index %d", i, q.index)
		}
		var n, initSum, maxSum int
		var workSum work.SeatSeconds
		for r := q.waiting.head; r != nil; r = r.next {
			n++
			initSum += r.est.InitialSeats
			maxSum += r.est.MaxSeats()
			workSum += r.est.TotalWork()
			seatsWaiting += r.waitSeats
		}
		if n != q.waiting.n || initSum != q.initialSeatsSum || maxSum != q.maxSeatsSum || workSum != q.totalWorkSum {
			return fmt.Errorf("queue %d sums are stale", i)
		}
		if h := q.waiting.head; h != nil && q.nextDispatchR < h.arrivalR {
			return fmt.Errorf("queue %d nextDispatchR %v precedes its head's arrival %v", i, q.nextDispatchR, h.arrivalR)
		}
		waiting += n
		queuedSeats += q.seatsInUse
		if q.active() {
			active++
		}
	}
	var executing, executingQueued int
	for r := qs.executing.head; r != nil; r = r.next {
		executing++
		if r.queue != nil {
			executingQueued++
		}
	}
	switch {
	case waiting != qs.totRequestsWaiting:
		return fmt.Errorf("%d waiting in queues, total says %d", waiting, qs.totRequestsWaiting)
	case seatsWaiting != qs.totSeatsWaiting:
		return fmt.Errorf("%d seats waiting in queues, total says %d", seatsWaiting, qs.totSeatsWaiting)
	case executing != qs.totRequestsExecuting:
		return fmt.Errorf("%d executing listed, total says %d", executing, qs.totRequestsExecuting)
	case queuedSeats != qs.queuedSeatsInUse:
		return fmt.Errorf("%d seats in use in queues, total says %d", queuedSeats, qs.queuedSeatsInUse)
	case active != qs.activeQueues:
		return fmt.Errorf("%d active queues, count says %d", active, qs.activeQueues)
	case qs.totSeatsInUse < 0 || qs.totSeatsWaiting < 0:
		return fmt.Errorf("negative seats: %d in use, %d waiting", qs.totSeatsInUse, qs.totSeatsWaiting)
	}
	return nil
}
