package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// Leaser takes a job's items one at a time and leaves each in its caller's
// hands until the caller completes, fails or releases it: the pull model of
// the work queue, for protocols that hold an item across calls (the Redis
// front). Worker is the push model, for Go handlers.
//
// The guarantees are Worker's: a lease not extended within the job's item
// timeout returns its item to the queue, and the first result of an item is
// the only one stored.
type Leaser struct {
	c           *Client
	job         string
	cons        jetstream.Consumer
	itemTimeout time.Duration
	timeout     time.Duration // the job's worker.timeout
	o           workerOptions
	log         *slog.Logger
}

// Lease is an item taken by a Leaser.
type Lease struct {
	Item      *schemas.WorkItem
	l         *Leaser
	msg       jetstream.Msg
	delivered uint64
	start     time.Time
}

// Leaser opens job for leasing. Unlike a Worker's, it never creates the
// job: it returns ErrJobNotFound for a job that does not exist, and
// ErrJobFinished when the job is finished. Of opts, WithWorkerID names the
// results and WithRetryDelay spaces the retries of failed items.
func (c *Client) Leaser(ctx context.Context, job string, opts ...WorkerOption) (*Leaser, error) {
	o := defaultWorkerOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if _, _, err := c.Jobs().Get(ctx, job); err != nil {
		return nil, fmt.Errorf("lease items of %s: %w", job, err)
	}
	rec, err := c.OpenJob(ctx, job)
	if err != nil {
		return nil, err
	}
	if rec.State.Final() {
		return nil, fmt.Errorf("lease items of %s: %w (%s)", job, ErrJobFinished, rec.State)
	}
	cons, err := c.workConsumer(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("work consumer for %s: %w", job, notPermitted(ctx, err))
	}
	return &Leaser{c: c, job: job, cons: cons, itemTimeout: rec.Spec.ItemTimeout.D(), timeout: rec.Spec.Worker.Timeout.D(), o: o,
		log: c.log.With("job", job, "worker", o.id)}, nil
}

// ItemTimeout is how long a lease lasts without being extended.
func (l *Leaser) ItemTimeout() time.Duration { return l.itemTimeout }

// Timeout is the job's worker.timeout, the longest one item may run: a
// lease is not to be extended past it (zero: no limit).
func (l *Leaser) Timeout() time.Duration { return l.timeout }

// Next leases the next item, waiting up to wait for one; it returns nil and
// no error when none came. Messages on the queue that are not readable items
// are dead-lettered on the way.
func (l *Leaser) Next(ctx context.Context, wait time.Duration) (*Lease, error) {
	deadline := l.c.clk.Now().Add(wait)
	for {
		left := deadline.Sub(l.c.clk.Now())
		if left <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		var (
			msg jetstream.Msg
			err error
		)
		for m, ferr := range consume.Fetch(ctx, l.cons, consume.Pull{Max: 1, Wait: left}) {
			if ferr != nil {
				err = ferr
				continue
			}
			msg = m
		}
		if msg == nil {
			return nil, err
		}
		if lease := l.lease(ctx, msg); lease != nil {
			return lease, nil
		}
	}
}

// lease makes msg a Lease, or dead-letters it when it is not an item of the
// job and returns nil.
func (l *Leaser) lease(ctx context.Context, msg jetstream.Msg) *Lease {
	item, md, _ := l.c.readItem(ctx, l.job, msg, l.log)
	if item == nil {
		return nil
	}
	return &Lease{Item: item, l: l, msg: msg, delivered: md.NumDelivered, start: l.c.clk.Now()}
}

// readItem reads msg, taken from job's queue, as an item of job: the one
// way the worker and the Redis front read one. A message that is not one
// (undecodable, or another job's) is set aside as a dead letter: it returns
// no item, and setAside true. A message without metadata is logged and
// left to come back.
func (c *Client) readItem(ctx context.Context, job string, msg jetstream.Msg, log *slog.Logger) (
	item *schemas.WorkItem, md *jetstream.MsgMetadata, setAside bool) {
	md, err := msg.Metadata()
	if err != nil {
		log.Error("item without metadata", "err", err)
		return nil, nil, false
	}
	item, err = Decode[schemas.WorkItem](msg.Data(), msg.Headers())
	if err == nil && item.Job != job {
		err = fmt.Errorf("%w: item of job %q on the queue of %q", ErrMalformed, item.Job, job)
	}
	if err != nil {
		c.setAsideMalformed(ctx, job, msg, md, err, log)
		return nil, md, true
	}
	return item, md, false
}

// Remaining is how many of the job's items are not finished: queued, or
// leased and not yet completed (by any worker). It is 0 once the job is
// finished, and at least 1 while it is created (its workload is being
// queued).
func (l *Leaser) Remaining(ctx context.Context) (int, error) {
	rec, _, err := l.c.Jobs().Get(ctx, l.job)
	if err != nil {
		return 0, err
	}
	switch {
	case rec.State.Final():
		return 0, nil
	case rec.State == schemas.Created:
		return max(1, rec.Total), nil
	}
	info, err := l.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("work consumer for %s: %w", l.job, notPermitted(ctx, err))
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

// Extend restarts the lease's item timeout.
func (ls *Lease) Extend() error { return ls.msg.InProgress() }

// Release returns the item to the queue at once, for another delivery.
func (ls *Lease) Release() error { return ls.msg.Nak() }

// Complete stores output as the item's result and acknowledges the item.
// It returns ErrDuplicateResult when the item already had a result (this
// one is discarded and the item acknowledged all the same); on any other
// error the item returns to the queue.
func (ls *Lease) Complete(ctx context.Context, output string) error {
	l := ls.l
	res := &schemas.Result{ItemID: ls.Item.ID, Job: l.job, Output: output, Worker: l.o.id, Attempt: int(ls.delivered),
		Duration: schemas.Duration(l.c.clk.Since(ls.start)), FinishedAt: l.c.clk.Now()}
	err := l.c.PublishResult(MessageContext(ctx, ls.msg.Headers()), res)
	if err != nil && !errors.Is(err, ErrDuplicateResult) {
		ls.retry(ctx)
		return err
	}
	// Acknowledged synchronously: the pull model's callers count the
	// queue right after (a rediswq worker's loop test), and must not count
	// this item as still leased.
	if aerr := ls.msg.DoubleAck(ctx); aerr != nil {
		l.log.Warn("ack failed; the item will be redelivered and its result deduplicated", "item", ls.Item.ID, "err", aerr)
	}
	return err
}

// Fail records cause as the item's last error and returns the item to the
// queue after the retry delay; once its deliveries are used up it is
// dead-lettered with that error.
func (ls *Lease) Fail(ctx context.Context, cause error) {
	ls.l.c.recordFailure(ctx, ls.l.job, ls.Item.ID, cause)
	ls.retry(ctx)
}

func (ls *Lease) retry(ctx context.Context) {
	d := retryDelay(ls.l.o.retryDelay, ls.l.o.maxRetryDelay, ls.delivered)
	if err := ls.msg.NakWithDelay(d); err != nil && ctx.Err() == nil {
		ls.l.log.Warn("nak failed; the item returns when its lease expires", "item", ls.Item.ID, "err", err)
	}
}

// setAsideMalformed dead-letters msg, a message on job's queue that is not
// one of its items, and acknowledges it; when the letter cannot be stored
// the message returns to the queue for a later try.
func (c *Client) setAsideMalformed(ctx context.Context, job string, msg jetstream.Msg, md *jetstream.MsgMetadata, cause error, log *slog.Logger) {
	d := MalformedLetter(job, msg.Subject(), msg.Data(), msg.Headers(), cause, c.clk.Now())
	d.Deliveries, d.Sequence = int(md.NumDelivered), md.Sequence.Stream
	if err := c.publishDeadLetter(ctx, d, fmt.Sprintf("%s/seq/%d", job, md.Sequence.Stream)); err != nil {
		log.Warn("malformed item not dead-lettered yet, will retry", "seq", md.Sequence.Stream, "err", err)
		if err := msg.NakWithDelay(time.Second); err != nil {
			log.Warn("nak failed; the message returns when its lease expires", "err", err)
		}
		return
	}
	log.Warn("malformed item dead-lettered", "seq", md.Sequence.Stream, "err", cause)
	if err := msg.Ack(); err != nil {
		log.Warn("ack of malformed item failed", "err", err)
	}
}
