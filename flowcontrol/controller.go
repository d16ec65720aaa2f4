package flowcontrol

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pace-platform/pace/flowcontrol/borrowing"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/queueset"
	"github.com/pace-platform/pace/flowcontrol/retryafter"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// WorkEstimate is the expected cost of a request in seats and time.
type WorkEstimate = work.Estimate

// Request is an admitted request; call Finish exactly once.
type Request = queueset.Request

// Callbacks tell a request's caller of its queuing and of its seats'
// release (see queueset.Callbacks).
type Callbacks = queueset.Callbacks

// RejectReason says why a request was not executed.
type RejectReason = queueset.Reason

// The reject reasons.
const (
	ReasonQueueFull        = queueset.QueueFull
	ReasonConcurrencyLimit = queueset.ConcurrencyLimit
	ReasonTimeOut          = queueset.TimeOut
)

// QueueEvent is a request joining or leaving a queue (see WithQueueObserver).
type QueueEvent = queueset.Event

// The queue event kinds.
const (
	QueueEnqueued   = queueset.Enqueued
	QueueDispatched = queueset.Dispatched
	QueueWithdrawn  = queueset.Withdrawn
)

// Wait limits applied to queued requests (kube's HTTP filter rule).
const (
	DefaultWaitLimit = 15 * time.Second // RequestTimeout/4 for requests without a deadline
	MaxWaitLimit     = time.Minute
)

// ErrUnknownPriorityLevel is returned by StartRequest for a level that is not configured.
var ErrUnknownPriorityLevel = errors.New("unknown priority level")

// RejectedError is returned by StartRequest when a request is not executed;
// an HTTP front end answers 429 with Retry-After.
type RejectedError struct {
	PriorityLevel string
	FlowSchema    string
	Reason        RejectReason
	RetryAfter    time.Duration
	// Seats is the rejected request's MaxSeats.
	Seats int
}

// Error describes the rejection.
func (e *RejectedError) Error() string {
	return fmt.Sprintf("request of flow schema %q rejected by priority level %q: %s (retry after %v)",
		e.FlowSchema, e.PriorityLevel, e.Reason, e.RetryAfter)
}

// Controller admits requests into priority levels. It is safe for concurrent use.
type Controller struct {
	clock      eventclock.Interface
	retryAfter *retryafter.Tracker
	tab        atomic.Pointer[levelTable] // replaced whole by Reconfigure and pruning
	// observeQueues, if set, is told of every request joining or leaving a queue.
	observeQueues func(QueueEvent)

	mu       sync.Mutex // serialises AdjustBorrowing and Reconfigure; guards the fields below
	cfg      Config     // the desired configuration
	fairFrac float64    // the last adjustment's fair proportion (0 when constrained)
}

// levelTable is one immutable set of levels.
type levelTable struct {
	byName     map[string]*level
	order      []*level // configuration order (lingering levels last), for borrowing and dumps
	nominalSum int
}

type level struct {
	cfg      PriorityLevel
	limits   borrowing.Limits
	maxSeats int // widest request for queuing levels; 0 for others
	qs       *queueset.QueueSet
	// lingering marks a level removed from the configuration that still has
	// requests waiting or executing; it keeps its seats until idle.
	lingering bool
	// guarded by Controller.mu
	demand  borrowing.DemandStats
	current int
	target  float64
}

// Option configures a Controller.
type Option func(*Controller)

// WithQueueObserver has every level's queue set call observe when a request
// joins a queue (QueueEnqueued, with the length of that queue right after it
// joined, itself included) and when it leaves it (QueueDispatched, or
// QueueWithdrawn when its wait ends unexecuted): what kube-apiserver counts
// in current_inqueue_requests, current_inqueue_seats and
// request_queue_length_after_enqueue. Requests of levels without queues
// (exempt and Reject levels) and rejected ones cause no event. observe runs
// with the queue set's lock held, on whichever goroutine made the change, so
// it must be quick and must not call back into the Controller.
func WithQueueObserver(observe func(QueueEvent)) Option {
	return func(c *Controller) { c.observeQueues = observe }
}

// New validates cfg and returns a Controller whose limits are the idle
// borrowing allocation until AdjustBorrowing sees demand.
func New(clk eventclock.Interface, cfg Config, opts ...Option) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{clock: clk, retryAfter: retryafter.New(clk.Now), cfg: cfg}
	for _, opt := range opts {
		opt(c)
	}
	tab, err := c.buildTable(cfg, nil)
	if err != nil {
		return nil, err
	}
	c.tab.Store(tab)
	c.AdjustBorrowing()
	return c, nil
}

// Reconfigure applies a new configuration without dropping anything: a level
// that stays keeps its queue set (queues added or drained, limits changed,
// waiting requests kept, executing ones never pre-empted); a removed level
// with requests waiting or executing lingers, still counted in the shares,
// until it is idle (then AdjustBorrowing drops it); new levels start empty.
// On error nothing changes.
func (c *Controller) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tab, err := c.buildTable(cfg, c.tab.Load())
	if err != nil {
		return err
	}
	c.cfg = cfg
	c.tab.Store(tab)
	c.adjustLocked()
	return nil
}

// buildTable computes the levels of cfg, reusing old's queue sets by name
// and keeping old's busy levels that cfg drops as lingering ones.
func (c *Controller) buildTable(cfg Config, old *levelTable) (*levelTable, error) {
	levels := slices.Clone(cfg.Levels)
	lingering := map[string]bool{}
	if old != nil {
		for _, lv := range old.order {
			if !slices.ContainsFunc(cfg.Levels, func(l PriorityLevel) bool { return l.Name == lv.cfg.Name }) && !lv.qs.IsIdle() {
				levels = append(levels, lv.cfg)
				lingering[lv.cfg.Name] = true
			}
		}
	}
	specs := make([]borrowing.Level, len(levels))
	for i, l := range levels {
		specs[i] = borrowing.Level{Name: l.Name, Exempt: l.Exempt, NominalConcurrencyShares: l.NominalConcurrencyShares,
			LendablePercent: l.LendablePercent, BorrowingLimitPercent: l.BorrowingLimitPercent}
	}
	limits, sum := borrowing.ComputeLimits(cfg.ServerConcurrencyLimit, specs)
	tab := &levelTable{byName: map[string]*level{}, nominalSum: sum}
	type reuse struct {
		qs    *queueset.QueueSet
		qcfg  queueset.Config
		limit int
	}
	var reused []reuse
	for i, l := range levels {
		qcfg := queueset.Config{Name: l.Name, Queues: l.Queues, QueueLengthLimit: l.QueueLengthLimit, HandSize: l.HandSize}
		lv := &level{cfg: l, limits: limits[i], lingering: lingering[l.Name]}
		switch {
		case l.Exempt:
			qcfg.Queues = queueset.Exempt
		case l.Reject:
			qcfg.Queues = 0
		default:
			lv.maxSeats = borrowing.MaxSeats(limits[i].Nominal, l.HandSize)
		}
		limit := limits[i].Nominal - limits[i].Lendable/2
		var prev *level
		if old != nil {
			prev = old.byName[l.Name]
		}
		if prev != nil && prev.cfg.Exempt == l.Exempt {
			lv.qs, lv.demand, lv.current = prev.qs, prev.demand, prev.current
			reused = append(reused, reuse{prev.qs, qcfg, limit})
		} else {
			qs, err := queueset.New(c.clock, qcfg, limit, queueset.WithObserver(c.observeQueues))
			if err != nil {
				return nil, fmt.Errorf("level %s: %w", l.Name, err)
			}
			lv.qs = qs
		}
		tab.byName[l.Name] = lv
		tab.order = append(tab.order, lv)
	}
	for _, r := range reused { // after every possible error: all or nothing
		if err := r.qs.Reconfigure(r.qcfg, r.limit); err != nil {
			return nil, fmt.Errorf("level %s: %w", r.qcfg.Name, err)
		}
	}
	return tab, nil
}

// StartRequest admits a request of the given flow into a priority level,
// blocking while it waits in a queue. It returns the dispatched request, a
// *RejectedError (queue full, no room on a Reject level, or withdrawn as
// time-out when ctx ends or the wait limit passes), or ErrUnknownPriorityLevel.
// hash is the flow's hash (see HashFlow); label names the request in dumps.
// cb.Queued, if set, is told when the request joins its queue (true) and
// leaves it (false), and cb.Released when its seats are given back, with
// the level's lock held; requests of levels without queues never join one.
// cb.Dispatched is not used: StartRequest returns at dispatch.
func (c *Controller) StartRequest(ctx context.Context, est WorkEstimate, hash uint64, flowSchema, priorityLevel, label string, cb Callbacks) (*Request, error) {
	lv := c.tab.Load().byName[priorityLevel]
	if lv == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownPriorityLevel, priorityLevel)
	}
	r, reason := lv.qs.Start(est, hash, flowSchema, label, queueset.Callbacks{Queued: cb.Queued, Released: cb.Released})
	if r == nil {
		return nil, c.reject(priorityLevel, flowSchema, reason, est)
	}
	if r.Wait(ctx) {
		return r, nil
	}
	return nil, c.reject(priorityLevel, flowSchema, ReasonTimeOut, est)
}

// WithWaitLimit bounds how long a request may wait in a queue, measured on the
// controller's clock: a quarter of the time to ctx's deadline, or
// DefaultWaitLimit without one, and at most MaxWaitLimit. Cancel the returned
// context when StartRequest returns.
func (c *Controller) WithWaitLimit(ctx context.Context) (context.Context, context.CancelFunc) {
	limit := DefaultWaitLimit
	if deadline, ok := ctx.Deadline(); ok {
		limit = deadline.Sub(c.clock.Now()) / 4
	}
	return c.WaitAtMost(ctx, limit)
}

// WaitAtMost bounds how long a request may wait in a queue to limit (at most
// MaxWaitLimit), measured on the controller's clock. Cancel the returned
// context when StartRequest returns.
func (c *Controller) WaitAtMost(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	limit = min(limit, MaxWaitLimit)
	ctx, cancel := context.WithCancel(ctx)
	// The clock's event cannot be stopped: it holds only this pointer, which
	// the caller's cancel clears, so a request that did not wait is not kept
	// reachable (its context, its values) until the limit has passed.
	armed := &atomic.Pointer[context.CancelFunc]{}
	armed.Store(&cancel)
	c.clock.EventAfterDuration(func(time.Time) {
		if f := armed.Swap(nil); f != nil {
			(*f)()
		}
	}, limit)
	return ctx, func() {
		armed.Store(nil)
		cancel()
	}
}

func (c *Controller) reject(priorityLevel, flowSchema string, reason RejectReason, est WorkEstimate) error {
	c.retryAfter.RecordDropped(priorityLevel)
	return &RejectedError{PriorityLevel: priorityLevel, FlowSchema: flowSchema, Reason: reason,
		RetryAfter: c.retryAfter.RetryAfter(priorityLevel), Seats: est.MaxSeats()}
}

// MaxSeats returns the widest estimate the level allows (0: no per-level
// cap); pass it to work.NewEstimator.
func (c *Controller) MaxSeats(priorityLevel string) int {
	if lv := c.tab.Load().byName[priorityLevel]; lv != nil {
		return lv.maxSeats
	}
	return 0
}

// IsIdle reports whether the level has nothing waiting or executing.
func (c *Controller) IsIdle(priorityLevel string) bool {
	lv := c.tab.Load().byName[priorityLevel]
	return lv == nil || lv.qs.IsIdle()
}

// AdjustBorrowing folds each level's seat demand since the last call into its
// smoothed demand and rebalances the concurrency limits. Call it every
// borrowing.AdjustmentPeriod (Run does).
func (c *Controller) AdjustBorrowing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	tab := c.tab.Load()
	if slices.ContainsFunc(tab.order, func(lv *level) bool { return lv.lingering && lv.qs.IsIdle() }) {
		if pruned, err := c.buildTable(c.cfg, tab); err == nil { // drops the idle lingering levels
			c.tab.Store(pruned)
		}
	}
	c.adjustLocked()
}

func (c *Controller) adjustLocked() {
	tab := c.tab.Load()
	states := make([]borrowing.LevelState, len(tab.order))
	for i, lv := range tab.order {
		lv.demand.Update(lv.qs.SeatDemand().Reset())
		states[i] = borrowing.LevelState{Exempt: lv.cfg.Exempt, Limits: lv.limits, Demand: lv.demand, Current: lv.current}
	}
	alloc := borrowing.Adjust(tab.nominalSum, states)
	c.fairFrac = alloc.FairFraction
	for i, lv := range tab.order {
		lv.current, lv.target = alloc.Current[i], alloc.Target[i]
		lv.qs.SetConcurrencyLimit(alloc.Current[i])
	}
}

// FairFraction returns the fair proportion of the last borrowing adjustment
// (kube's apiserver_flowcontrol_seat_fair_frac).
func (c *Controller) FairFraction() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fairFrac
}

// Run calls AdjustBorrowing every borrowing.AdjustmentPeriod of the
// controller's clock until ctx ends, then returns nil.
func (c *Controller) Run(ctx context.Context) error {
	eventclock.Every(ctx, c.clock, borrowing.AdjustmentPeriod, c.AdjustBorrowing)
	return nil
}

// HashFlow returns the flow hash kube-apiserver uses: the first 8 bytes,
// little-endian, of SHA-256(flowSchema ‖ 0x00 ‖ distinguisher).
func HashFlow(flowSchema, distinguisher string) uint64 {
	buf := make([]byte, 0, 128) // on the stack for the usual short names
	buf = append(append(append(buf, flowSchema...), 0), distinguisher...)
	sum := sha256.Sum256(buf)
	return binary.LittleEndian.Uint64(sum[:8])
}
