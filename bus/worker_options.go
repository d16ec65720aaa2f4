package bus

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nuid"

	"github.com/pace-platform/pace/schemas"
)

// WorkerOption configures a Worker.
type WorkerOption func(*workerOptions) error

type workerOptions struct {
	concurrency   int
	heartbeat     time.Duration
	grace         time.Duration
	id            string
	retryDelay    time.Duration
	maxRetryDelay time.Duration
	opened        func(*schemas.JobRecord)
}

func defaultWorkerOptions() workerOptions {
	host, _ := os.Hostname()
	id := os.Getenv("PACE_WORKER_ID") // set by Pace's runtimes: a replica's name, a pod's name
	if id == "" {
		id = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), nuid.Next()[:6])
	}
	return workerOptions{
		concurrency:   1,
		grace:         10 * time.Second,
		id:            id,
		retryDelay:    time.Second,
		maxRetryDelay: time.Minute,
	}
}

// WithConcurrency sets how many items the worker processes at once (default 1).
// The worker fetches only as many items as it has idle slots, so no item
// waits in a local buffer while its lease runs.
func WithConcurrency(n int) WorkerOption {
	return func(o *workerOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d must be >= 1", ErrInvalidOption, n)
		}
		o.concurrency = n
		return nil
	}
}

// WithHeartbeat sets how often a running item's lease is extended. Zero (the
// default) means a third of the job's item timeout; a negative value disables
// extension, so an item taking longer than its timeout is given to another worker.
func WithHeartbeat(d time.Duration) WorkerOption {
	return func(o *workerOptions) error { o.heartbeat = d; return nil }
}

// WithGrace sets how long running items may finish after Run's context ends
// (default 10s). Items still running then are cancelled and returned to the queue.
func WithGrace(d time.Duration) WorkerOption {
	return func(o *workerOptions) error {
		if d < 0 {
			return fmt.Errorf("%w: negative grace", ErrInvalidOption)
		}
		o.grace = d
		return nil
	}
}

// WithWorkerID names the worker in results, logs and its presence; the
// default is $PACE_WORKER_ID (the replica's name, given by Pace's
// runtimes), else host-pid-random.
func WithWorkerID(id string) WorkerOption {
	return func(o *workerOptions) error {
		if id == "" {
			return fmt.Errorf("%w: empty worker id", ErrInvalidOption)
		}
		o.id = id
		return nil
	}
}

// WithRetryDelay sets the delay before a failed item is retried: base after
// the first failure, doubling up to max (defaults 1s and 1m).
func WithRetryDelay(base, max time.Duration) WorkerOption {
	return func(o *workerOptions) error {
		if base <= 0 || max < base {
			return fmt.Errorf("%w: retry delay needs 0 < base <= max", ErrInvalidOption)
		}
		o.retryDelay, o.maxRetryDelay = base, max
		return nil
	}
}

// WithJobOpened has Run call f with the job's record once it has opened the
// job, before any item is handled: a handler can then follow the job's
// spec, e.g. its worker.termination_grace.
func WithJobOpened(f func(*schemas.JobRecord)) WorkerOption {
	return func(o *workerOptions) error {
		o.opened = f
		return nil
	}
}
