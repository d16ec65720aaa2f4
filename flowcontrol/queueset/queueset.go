package queueset

import (
	"sync"
	"time"

	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/integrator"
	"github.com/pace-platform/pace/flowcontrol/shufflesharding"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// Reason says why a request was not executed.
type Reason string

// The reject reasons, as in kube-apiserver's rejected_requests_total metric.
const (
	// QueueFull: all seats were in use and the chosen queue was full.
	QueueFull Reason = "queue-full"
	// ConcurrencyLimit: a level without queues had no room.
	ConcurrencyLimit Reason = "concurrency-limit"
	// TimeOut: the request was withdrawn while waiting (ctx ended or wait limit).
	TimeOut Reason = "time-out"
)

// EventKind says how a request joined or left a queue.
type EventKind uint8

// The event kinds.
const (
	// Enqueued: the request joined a queue (also one it leaves at once).
	Enqueued EventKind = iota + 1
	// Dispatched: the request left its queue to execute.
	Dispatched
	// Withdrawn: the request left its queue unexecuted (Cancel: time-out).
	Withdrawn
)

// Event is a request joining or leaving a queue. Requests of levels without
// queues (exempt and Reject levels) and rejected ones cause none.
type Event struct {
	Kind          EventKind
	PriorityLevel string // the queue set's Config.Name
	FlowSchema    string
	// Seats is the request's MaxSeats as counted while it waits: the same
	// in its Enqueued event and in the one that ends its wait, even when
	// the final seats are clamped at dispatch.
	Seats int
	// QueueLength, for Enqueued, is the number of requests then waiting in
	// the queue joined, itself included; 0 for the other kinds.
	QueueLength int
}

// rDecrement is how far R is wound back at an epoch advance; highR triggers it.
const (
	rDecrement = work.MaxSeatSeconds / 2
	highR      = rDecrement + rDecrement/2
)

// QueueSet is the fair-queuing state of one priority level. It is safe for
// concurrent use.
type QueueSet struct {
	clock eventclock.Interface
	g     time.Duration    // service time guess
	seatG work.SeatSeconds // the work of one seat for g: seats×G as upstream rounds it when g is a multiple of 10 ns
	// demand integrates seats in use plus seats waiting (reference §1.10).
	demand  *integrator.Integrator
	observe func(Event) // nil: nobody watches the queues

	mu           sync.Mutex // guards the fields below
	cfg          Config
	limit        int
	dealer       *shufflesharding.Dealer
	queues       []*queue
	currentR     work.SeatSeconds
	lastRealTime time.Time
	robinIndex   int
	enqueues     int
	activeQueues int // queues with waiting or executing requests
	executing    requestList

	totRequestsWaiting   int
	totRequestsExecuting int
	totSeatsInUse        int
	totSeatsWaiting      int
	queuedSeatsInUse     int // seatsInUse summed over queues

	dispatched, rejected, timedOut int
	epochAdvances, epochFailures   int
	violation                      error // first over-limit dispatch, reported by CheckInvariants
	lastDispatch                   DispatchDump
	noAccommodation                map[string]int // by flow schema of the head that did not fit
}

// New returns a queue set with the given configuration and concurrency limit.
// It fails if the queue and hand sizes are invalid (shuffle sharding's
// messages) or an option is.
func New(clk eventclock.Interface, cfg Config, concurrencyLimit int, opts ...Option) (*QueueSet, error) {
	o := options{serviceTimeGuess: DefaultServiceTimeGuess}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	dealer, err := dealerFor(cfg)
	if err != nil {
		return nil, err
	}
	qs := &QueueSet{
		clock:        clk,
		g:            o.serviceTimeGuess,
		seatG:        work.SeatsTimesDuration(1, o.serviceTimeGuess),
		demand:       integrator.New(clk),
		observe:      o.observe,
		cfg:          cfg,
		limit:        max(concurrencyLimit, 0),
		dealer:       dealer,
		lastRealTime: clk.Now(),
		robinIndex:   -1,
	}
	for i := range max(cfg.Queues, 0) {
		qs.queues = append(qs.queues, &queue{index: i})
	}
	return qs, nil
}

// SeatDemand is the integrator of the level's seat demand; borrowing resets it
// every adjustment period.
func (qs *QueueSet) SeatDemand() *integrator.Integrator { return qs.demand }

// Callbacks are a request's own notifications. Both are called with the
// queue set's lock held, so they must not call back into the queue set.
type Callbacks struct {
	// Dispatched, if set, is called when the request starts executing;
	// the request is then not to be waited for.
	Dispatched func(*Request)
	// Queued, if set, is called with true when the request joins a queue
	// and with false when it leaves it (dispatched or withdrawn), like
	// kube-apiserver's queue note behind apiserver_current_inqueue_requests.
	Queued func(inQueue bool)
	// Released, if set, is called with the seats the request gives back:
	// when it finishes, or AdditionalLatency later for a request with a
	// final phase (its final seats are in use until then, as
	// apiserver_flowcontrol_current_executing_seats counts them).
	Released func(seats int)
}

// Start submits a request without blocking. It returns the request, or a nil
// request and the reject reason. A returned request is either executing
// already or waiting. label identifies the request in dumps (e.g. a user
// name).
func (qs *QueueSet) Start(est work.Estimate, hashValue uint64, flowSchema, label string, cb Callbacks) (*Request, Reason) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.syncTimeLocked()
	now := qs.lastRealTime
	r := &Request{qs: qs, est: work.Complete(est, qs.g), flowSchema: flowSchema, label: label,
		arrivalTime: now, arrivalR: qs.currentR, cb: cb}
	if qs.cfg.Queues < 1 {
		if !qs.canAccommodateLocked(r.est.MaxSeats()) {
			qs.rejected++
			return nil, ConcurrencyLimit
		}
		qs.startLocked(r, now)
		qs.demand.Set(float64(qs.totSeatsInUse + qs.totSeatsWaiting))
		return r, ""
	}
	q := qs.queues[qs.shuffleShardLocked(hashValue)]
	if qs.totSeatsInUse >= qs.limit && q.waiting.n >= qs.cfg.QueueLengthLimit {
		qs.rejected++
		return nil, QueueFull
	}
	qs.enqueueLocked(q, r)
	qs.boundNextDispatchLocked(q)
	qs.dispatchAsMuchAsPossibleLocked()
	if r.state == stateWaiting && cb.Dispatched == nil {
		r.ready = make(chan struct{})
	}
	return r, ""
}

// IsIdle reports whether nothing is waiting or executing (lingering final
// seats do not count).
func (qs *QueueSet) IsIdle() bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.isIdleLocked()
}

func (qs *QueueSet) isIdleLocked() bool {
	return qs.totRequestsWaiting == 0 && qs.totRequestsExecuting == 0
}

// syncTimeLocked advances R to now at the rate in force since the last sync.
func (qs *QueueSet) syncTimeLocked() {
	now := qs.clock.Now()
	elapsed := now.Sub(qs.lastRealTime)
	qs.lastRealTime = now
	if qs.activeQueues == 0 || elapsed == 0 {
		return
	}
	ratio := float64(min(qs.queuedSeatsInUse+qs.totSeatsWaiting, qs.limit)) / float64(qs.activeQueues)
	prev := qs.currentR
	qs.currentR += work.SeatsTimesDuration(ratio, elapsed)
	if qs.currentR >= highR && qs.currentR >= prev {
		qs.advanceEpochLocked()
	}
}

// advanceEpochLocked winds R and every reading taken from it back by rDecrement.
func (qs *QueueSet) advanceEpochLocked() {
	qs.currentR -= rDecrement
	ok := true
	for _, q := range qs.queues {
		if !q.active() {
			q.nextDispatchR = 0 // the next arrival sets it to R
			continue
		}
		if q.nextDispatchR < rDecrement {
			ok = false
		}
		q.nextDispatchR -= rDecrement
		for r := q.waiting.head; r != nil; r = r.next {
			if r.arrivalR < rDecrement {
				ok = false
			}
			r.arrivalR -= rDecrement
		}
	}
	if ok {
		qs.epochAdvances++
	} else {
		qs.epochFailures++
	}
}

// shuffleShardLocked returns the index of the queue for a new request.
func (qs *QueueSet) shuffleShardLocked(hashValue uint64) int {
	var buf [8]int
	hand := qs.dealer.DealIntoHand(hashValue, buf[:0])
	offset := qs.enqueues % len(hand)
	qs.enqueues++
	best, bestWork := -1, work.MaxSeatSeconds
	for i := range hand {
		idx := hand[(offset+i)%len(hand)]
		if w := qs.queues[idx].totalWorkSum; w < bestWork {
			best, bestWork = idx, w
		}
	}
	return best
}

func (qs *QueueSet) enqueueLocked(q *queue, r *Request) {
	if !q.active() {
		q.nextDispatchR = qs.currentR
		qs.activeQueues++
	}
	r.queue = q
	r.waitSeats = r.est.MaxSeats()
	q.enqueue(r)
	qs.totRequestsWaiting++
	qs.totSeatsWaiting += r.waitSeats
	qs.demand.Set(float64(qs.totSeatsInUse + qs.totSeatsWaiting))
	qs.notifyLocked(Enqueued, r, q.waiting.n)
}

// notifyLocked tells the observer and r's Queued callback, if any, that r
// joined or left its queue.
func (qs *QueueSet) notifyLocked(kind EventKind, r *Request, queueLength int) {
	if r.cb.Queued != nil {
		r.cb.Queued(kind == Enqueued)
	}
	if qs.observe != nil {
		qs.observe(Event{Kind: kind, PriorityLevel: qs.cfg.Name, FlowSchema: r.flowSchema, Seats: r.waitSeats, QueueLength: queueLength})
	}
}

// boundNextDispatchLocked is the anti-windup floor: a queue's next dispatch
// may not precede its head's arrival in virtual time.
func (qs *QueueSet) boundNextDispatchLocked(q *queue) {
	if h := q.waiting.head; h != nil && q.nextDispatchR < h.arrivalR {
		q.nextDispatchR = h.arrivalR
	}
}
