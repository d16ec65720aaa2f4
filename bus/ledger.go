package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// The ledger. A streaming job's items are whatever its principals publish,
// and a work item leaves the work stream once processed, so without a
// record nothing would tell a result for an item the job was queued from
// a result for an id it never had. The work stream has interest retention
// and one durable consumer, "ledger", that sees every item: the manager
// runs it (KeepLedger) and enters each item of a streaming job in the
// ledger stream as pace.ledger.<job>.<item>, before acknowledging it. An
// item stays on the work stream until both its job's consumer and the
// ledger consumer have acknowledged it, so no item escapes the ledger,
// and none vanishes while its job has no consumer: the ledger consumer
// acknowledges an item only once its job's consumer exists, and leaves
// the items of a job that does not accept them to the stray sweep, which
// moves them to the job's dead letters. It enters the items of a
// streaming job that has finished too: the ledger may come to the last
// items of a job after they were processed and the job ended.
//
// A result of a streaming job counts only when the ledger has its item.
// One that it lacks is set aside (reason never_queued) once the ledger
// consumer has acknowledged every item stored before the result, with a
// margin for the clocks of a cluster's servers (ledgerSkew): an item is
// queued before its result, so the ledger would have it by then.

// ledgerConsumer is the durable consumer of the work stream that keeps
// the ledger.
const ledgerConsumer = "ledger"

// ledgerBatch is how many items the ledger takes at a time; ledgerHold is
// how long an item whose job does not accept it waits before the ledger
// looks at it again.
const (
	ledgerBatch = 256
	ledgerHold  = 5 * time.Second
)

// ledgerSkew is the margin SetAsideNeverQueued allows between the clocks of
// the servers leading the work and results streams.
const ledgerSkew = time.Second

// ensureLedgerConsumer makes the ledger's consumer of the work stream
// name.
func (c *Client) ensureLedgerConsumer(ctx context.Context, name string) error {
	return c.ensureConsumer(ctx, name, jetstream.ConsumerConfig{
		Durable: ledgerConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		Description:   "enters every item queued to a streaming job in the ledger",
		FilterSubject: c.prefix.Work("*"), DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 20_000,
	})
}

// Placement is what the ledger does with the work items of a job.
type Placement struct {
	// Enter enters each item in the ledger: the job is a streaming job,
	// whatever its state (an item of a job that has just finished may
	// have been processed, and its result must count).
	Enter bool
	// Release acknowledges each item, once entered: the job accepts items
	// and its work consumer exists. An item not released stays on the
	// work stream for the stray sweep to refuse (its job does not accept
	// items, or does not exist yet), and comes back to the ledger later.
	Release bool
}

// Placer tells the ledger what to do with the items of job. Before it
// answers Release, the job's work consumer must exist: the item would
// otherwise leave the stream with the ledger's acknowledgement.
type Placer func(ctx context.Context, job string) (Placement, error)

// ledgerLookout is how often KeepLedger looks for work streams made
// since (a user's first job makes one).
const ledgerLookout = 2 * time.Second

// KeepLedger runs the ledger consumer of every work stream until ctx
// ends, asking place about each job once per batch of items. An item
// whose job place cannot answer for is held, and comes back later. It
// returns an error when a consumer cannot be read (deleted, the server
// unreachable): the caller starts it again.
func (q Queues) KeepLedger(ctx context.Context, place Placer) error {
	c := q.c
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	kept := map[string]bool{}
	gone := make(chan string)
	for {
		names, err := c.workStreamNames(ctx)
		if err != nil {
			cancel(err)
		}
		for _, name := range names {
			if kept[name] {
				continue
			}
			kept[name] = true
			wg.Go(func() {
				err := c.keepLedger(ctx, name, place)
				switch {
				case err != nil && c.prefix.IsUserWorkStream(name) && streamGone(err):
					select { // an idle user's stream deleted: its ledger ends with it
					case gone <- name:
					case <-ctx.Done():
					}
				case err != nil:
					cancel(err)
				}
			})
		}
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case name := <-gone:
			delete(kept, name)
		case <-c.clk.After(ledgerLookout):
		}
	}
}

// streamGone reports whether err says a consumer's stream, or the
// consumer, was deleted.
func streamGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// keepLedger runs the ledger consumer of the work stream name.
func (c *Client) keepLedger(ctx context.Context, name string, place Placer) error {
	cons, err := c.js.Consumer(ctx, name, ledgerConsumer)
	if err != nil {
		return fmt.Errorf("ledger consumer of %s: %w", name, err)
	}
	idle := false
	for ctx.Err() == nil {
		// Items gather for a second into a batch; with none coming, one
		// request waits for the first for up to consume.IdleWait.
		n, wait := ledgerBatch, time.Second
		if idle {
			n, wait = 1, consume.IdleWait
		}
		msgs, ferr := fetchAll(ctx, cons, n, wait)
		if ferr != nil && ctx.Err() != nil {
			return nil
		}
		idle = len(msgs) == 0
		if err := c.enter(ctx, msgs, place); err != nil && ctx.Err() == nil {
			c.log.Warn("ledger entries failed; the items come back", "err", err)
		}
		if ferr != nil {
			return fmt.Errorf("ledger of %s: %w", name, ferr) // the consumer gone, the server unreachable: the caller starts again
		}
	}
	return nil
}

// fetchAll asks cons for up to n messages within wait and returns those that
// came; the wait ending is not an error.
func fetchAll(ctx context.Context, cons jetstream.Consumer, n int, wait time.Duration) ([]jetstream.Msg, error) {
	var msgs []jetstream.Msg
	for msg, err := range consume.Fetch(ctx, cons, consume.Pull{Max: n, Wait: wait}) {
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// enter places each of msgs, enters those to enter in the ledger, and once
// the ledger has stored them acknowledges those to release and gives the
// others back for later.
func (c *Client) enter(ctx context.Context, msgs []jetstream.Msg, place Placer) error {
	placed := map[string]Placement{}
	var release, hold []jetstream.Msg
	var stored []jetstream.PubAckFuture
	var failed error
	for _, msg := range msgs {
		job := c.prefix.SubjectJob(msg.Subject())
		p, ok := placed[job]
		if !ok {
			var err error
			if p, err = place(ctx, job); err != nil {
				failed = errors.Join(failed, fmt.Errorf("job %s: %w", job, err))
			}
			placed[job] = p
		}
		if p.Release {
			release = append(release, msg)
		} else {
			hold = append(hold, msg)
		}
		if !p.Enter {
			continue
		}
		it, err := Decode[schemas.WorkItem](msg.Data(), msg.Headers())
		if err != nil {
			continue // no item: no result can be for it
		}
		f, err := c.js.PublishAsync(c.prefix.Ledger(job, it.ID), nil)
		if err != nil {
			return errors.Join(failed, fmt.Errorf("ledger entry of %s: %w", job, err))
		}
		stored = append(stored, f)
	}
	for _, f := range stored {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return errors.Join(failed, fmt.Errorf("ledger entry %s: %w", f.Msg().Subject, err))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, msg := range release {
		_ = msg.Ack() // one lost comes back, and is entered again
	}
	for _, msg := range hold {
		_ = msg.NakWithDelay(ledgerHold)
	}
	return failed
}

// ledgerOf returns the ledger entries of rec's job, by subject; nil for a
// batch job, whose items are its workload.
func (c *Client) ledgerOf(ctx context.Context, rec *schemas.JobRecord) (map[string]uint64, error) {
	if rec.Spec.Mode == schemas.Batch {
		return nil, nil
	}
	return c.subjectCounts(ctx, ledgerFamily, c.prefix.JobLedger(rec.ID))
}

// ledgerSince returns a time before which every item the work stream
// name stored is in the ledger, or was handled by it: the time of the
// first item after the ledger consumer's acknowledgement floor, or the
// time the server read the floor when there is none. An idle user's stream
// is deleted only once it holds nothing: with it gone, every item it
// stored was handled.
func (c *Client) ledgerSince(ctx context.Context, name string) (time.Time, error) {
	cons, err := c.js.Consumer(ctx, name, ledgerConsumer)
	if errors.Is(err, jetstream.ErrStreamNotFound) && c.prefix.IsUserWorkStream(name) {
		return c.clk.Now(), nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger consumer of %s: %w", name, err)
	}
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return time.Time{}, fmt.Errorf("stream %s: %w", name, err)
	}
	info := cons.CachedInfo()
	floor := info.AckFloor.Stream
	raw, err := st.GetMsg(ctx, floor+1, jetstream.WithGetMsgSubject(c.prefix.Work("*")))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return info.TimeStamp, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("work stream after the ledger: %w", err)
	}
	return raw.Time, nil
}
