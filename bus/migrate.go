package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// The work stream once had work-queue retention; it now has interest
// retention, so that the manager's ledger consumer sees every item (see
// KeepLedger). JetStream cannot change a stream's retention to or from
// work queue, so Provision moves the items of an old work stream through a
// holding stream:
//
//  1. every item is copied to the holding stream (emptied first: a copy
//     interrupted before step 2 is made again from the old stream, which
//     still holds everything);
//  2. the old stream is deleted, with its consumers;
//  3. the new stream is created with the ledger consumer, each job that
//     accepts items gets its work consumer back, and the results of every
//     streaming job are entered in the ledger: they were stored before
//     the ledger existed, so they count as they did;
//  4. each held item is published again on its own subject, then deleted
//     from the holding stream, which is deleted last.
//
// A migration interrupted after step 2 resumes at step 3 the next time
// Provision runs, as the holding stream is still there. Items in flight
// when it runs are delivered again; the one result per item the results
// stream keeps makes a second result of one of them a refused duplicate.
// Header Nats-Expected-* of the original publishes are dropped: they held
// for the old stream.

// holdingFamily is the stream of a migration in progress.
const holdingFamily schemas.Stream = "WORK_MIGRATION"

// holdingSubject is the subject the holding stream keeps the work item of
// subject (a pace.work.<job> subject) under.
func (c *Client) holdingSubject(subject string) string {
	return string(c.prefix) + ".migration." + strings.TrimPrefix(subject, string(c.prefix)+".")
}

// migrateWork moves the work stream to want's retention when old, its
// current configuration, has work-queue retention, or finishes a
// migration an earlier call left half done. It reports whether it did
// either; the caller then has nothing more to do for the stream.
func (c *Client) migrateWork(ctx context.Context, want jetstream.StreamConfig, old *jetstream.StreamConfig) (bool, error) {
	hold := c.prefix.Stream(holdingFamily)
	held, err := c.existing(ctx, hold)
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", hold, err)
	}
	oldQueue := old != nil && old.Retention == jetstream.WorkQueuePolicy
	if !oldQueue && held == nil {
		return false, nil
	}
	if oldQueue {
		n, err := c.holdWork(ctx, want, hold)
		if err != nil {
			return true, err
		}
		if err := c.js.DeleteStream(ctx, want.Name); err != nil {
			return true, fmt.Errorf("delete the old work stream: %w", err)
		}
		c.log.Warn("work stream moving to interest retention: items held", "stream", want.Name, "items", n)
	}
	if _, err := c.js.CreateOrUpdateStream(ctx, want); err != nil {
		return true, fmt.Errorf("create the work stream: %w", err)
	}
	if err := c.ensureLedgerConsumer(ctx, want.Name); err != nil {
		return true, err
	}
	if err := c.restoreJobs(ctx); err != nil {
		return true, err
	}
	n, err := c.releaseHeld(ctx, hold)
	if err != nil {
		return true, err
	}
	if err := c.js.DeleteStream(ctx, hold); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return true, fmt.Errorf("delete %s: %w", hold, err)
	}
	c.log.Warn("work stream moved to interest retention", "stream", want.Name, "items", n)
	return true, nil
}

// holdWork copies every message of the work stream to a fresh holding
// stream named hold and returns how many.
func (c *Client) holdWork(ctx context.Context, want jetstream.StreamConfig, hold string) (int, error) {
	hst, err := c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: hold, Description: "work items while " + want.Name + " changes its retention",
		Subjects: []string{c.holdingSubject(c.prefix.Work("*"))}, Storage: jetstream.FileStorage,
		Replicas: want.Replicas,
	})
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", hold, err)
	}
	if err := hst.Purge(ctx); err != nil {
		return 0, fmt.Errorf("empty %s: %w", hold, err)
	}
	st, err := c.js.Stream(ctx, want.Name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", want.Name, err)
	}
	n := 0
	for seq := uint64(1); ; n++ {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(c.prefix.Work("*")))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read item %d: %w", seq, err)
		}
		seq = raw.Sequence + 1
		msg := &nats.Msg{Subject: c.holdingSubject(raw.Subject), Data: raw.Data, Header: raw.Header}
		if _, err := c.js.PublishMsg(ctx, msg); err != nil {
			return n, fmt.Errorf("hold item %d: %w", raw.Sequence, err)
		}
	}
}

// restoreJobs gives each job that accepts items its work consumer, and
// enters the results of every streaming job in the ledger.
func (c *Client) restoreJobs(ctx context.Context) error {
	jobs, err := c.Jobs().List(ctx)
	if err != nil {
		return err
	}
	for _, rec := range jobs {
		if !rec.State.Final() {
			if err := c.Queues().EnsureWork(ctx, rec); err != nil {
				return err
			}
		}
		if rec.Spec.Mode == schemas.Batch {
			continue
		}
		results, err := c.subjectCounts(ctx, resultsFamily, c.prefix.JobResults(rec.ID))
		if err != nil {
			return err
		}
		for subject := range results {
			if _, err := c.js.Publish(ctx, c.prefix.Ledger(rec.ID, resultItem(subject)), nil); err != nil {
				return fmt.Errorf("ledger of %s: %w", rec.ID, err)
			}
		}
	}
	return nil
}

// releaseHeld publishes each message of the holding stream hold on its own
// work subject again, deleting it from hold once stored, and returns how
// many.
func (c *Client) releaseHeld(ctx context.Context, hold string) (int, error) {
	hst, err := c.js.Stream(ctx, hold)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", hold, err)
	}
	n := 0
	for seq := uint64(1); ; n++ {
		raw, err := hst.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(c.holdingSubject(c.prefix.Work("*"))))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read held item %d: %w", seq, err)
		}
		seq = raw.Sequence + 1
		h := nats.Header{}
		for k, v := range raw.Header {
			if !strings.HasPrefix(k, "Nats-Expected") {
				h[k] = v
			}
		}
		subject := string(c.prefix) + "." + strings.TrimPrefix(raw.Subject, string(c.prefix)+".migration.")
		if _, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: raw.Data, Header: h}); err != nil {
			return n, fmt.Errorf("release held item %d: %w", raw.Sequence, err)
		}
		if err := hst.DeleteMsg(ctx, raw.Sequence); err != nil {
			return n, fmt.Errorf("delete held item %d: %w", raw.Sequence, err)
		}
	}
}
