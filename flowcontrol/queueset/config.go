package queueset

import (
	"fmt"
	"time"

	"github.com/pace-platform/pace/flowcontrol/shufflesharding"
)

// Exempt as Config.Queues makes a queue set that admits everything at once
// while still counting seats.
const Exempt = -1

// DefaultServiceTimeGuess is G, the initial guess of every request's service
// time in virtual-time accounting.
const DefaultServiceTimeGuess = 3 * time.Millisecond

// Config is the queuing configuration of one priority level.
type Config struct {
	// Name labels the queue set in dumps and events.
	Name string
	// Queues > 0 queues requests; 0 rejects what does not fit at once
	// (LimitResponse Reject); Exempt (−1) admits everything.
	Queues int
	// QueueLengthLimit bounds a queue's waiting requests while all seats are in use.
	QueueLengthLimit int
	// HandSize is the number of queues a flow is dealt.
	HandSize int
}

// Option tunes a queue set.
type Option func(*options) error

type options struct {
	serviceTimeGuess time.Duration
	observe          func(Event)
}

// WithObserver has the queue set call observe whenever a request joins or
// leaves a queue, with the queue set's lock held (observe must not call back
// into the queue set): the events behind kube-apiserver's
// current_inqueue_requests, current_inqueue_seats and
// request_queue_length_after_enqueue. A nil observe is ignored.
func WithObserver(observe func(Event)) Option {
	return func(o *options) error {
		o.observe = observe
		return nil
	}
}

// WithServiceTimeGuess replaces G (DefaultServiceTimeGuess); tests use it.
func WithServiceTimeGuess(g time.Duration) Option {
	return func(o *options) error {
		if g <= 0 {
			return fmt.Errorf("service time guess %v is not positive", g)
		}
		o.serviceTimeGuess = g
		return nil
	}
}

// dealerFor validates cfg and returns its dealer (nil without queues).
func dealerFor(cfg Config) (*shufflesharding.Dealer, error) {
	if cfg.Queues <= 0 {
		return nil, nil
	}
	if cfg.QueueLengthLimit < 0 {
		return nil, fmt.Errorf("queue length limit %d is negative", cfg.QueueLengthLimit)
	}
	return shufflesharding.NewDealer(cfg.Queues, cfg.HandSize)
}

// Reconfigure applies a new configuration and concurrency limit. Extra queues
// are added at once; surplus queues drain and disappear when empty. With
// Queues == 0 the old queue length limit and hand size still govern the
// leftover queues. Executing requests are never pre-empted; waiting ones are
// dispatched at once if the new limit allows. On error nothing changes.
func (qs *QueueSet) Reconfigure(cfg Config, concurrencyLimit int) error {
	dealer, err := dealerFor(cfg)
	if err != nil {
		return err
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.syncTimeLocked()
	if cfg.Queues > 0 {
		for len(qs.queues) < cfg.Queues {
			qs.queues = append(qs.queues, &queue{index: len(qs.queues)})
		}
	} else {
		cfg.QueueLengthLimit, cfg.HandSize = qs.cfg.QueueLengthLimit, qs.cfg.HandSize
	}
	qs.cfg, qs.dealer, qs.limit = cfg, dealer, max(concurrencyLimit, 0)
	qs.dispatchAsMuchAsPossibleLocked()
	return nil
}

// SetConcurrencyLimit changes C, e.g. after a borrowing adjustment.
func (qs *QueueSet) SetConcurrencyLimit(c int) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.syncTimeLocked()
	qs.limit = max(c, 0)
	qs.dispatchAsMuchAsPossibleLocked()
}
