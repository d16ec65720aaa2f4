package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// WorkState counts a job's items by where they are.
type WorkState struct {
	// Pending items wait in the main queue; InFlight are delivered and
	// not yet acknowledged (being processed or waiting for a retry).
	Pending, InFlight int
	// Results counts items with a result; Dead counts the job's items
	// with a dead letter and no result, and its unreadable messages.
	Results, Dead int
	// Refused counts the letters of items published to the job while it
	// did not accept items (reason refused): they were never its work, so
	// Dead leaves them out.
	Refused int
	// Redelivered counts the items waiting or in flight that were
	// delivered before: their worker failed them, or let their lease
	// expire.
	Redelivered int
	// NeverQueued counts the results a job holds for items it does not
	// know: not in a batch job's workload, not (or not yet) in a streaming
	// job's ledger. Results leaves them out, and SetAsideNeverQueued
	// moves them to the job's dead letters.
	NeverQueued int
}

// JobWork returns where the items of the job whose record is rec are.
func (c *Client) JobWork(ctx context.Context, rec *schemas.JobRecord) (WorkState, error) {
	var ws WorkState
	job := rec.ID
	cons, err := c.workConsumer(ctx, rec)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return ws, fmt.Errorf("work state of %s: %w", job, err)
	default:
		ci := cons.CachedInfo()
		ws.Pending, ws.InFlight, ws.Redelivered = int(ci.NumPending), ci.NumAckPending, ci.NumRedelivered
	}
	results, err := c.subjectCounts(ctx, resultsFamily, c.prefix.JobResults(job))
	if err != nil {
		return ws, err
	}
	ledger, err := c.ledgerOf(ctx, rec)
	if err != nil {
		return ws, err
	}
	for subject := range results {
		if c.neverQueued(rec, subject, ledger) {
			ws.NeverQueued++
		} else {
			ws.Results++
		}
	}
	dead, err := c.subjectCounts(ctx, deadFamily, c.prefix.Dead(job))
	if err != nil {
		return ws, err
	}
	if dead[c.prefix.Dead(job)] > 0 {
		ws.Dead, ws.Refused, err = c.deadItems(ctx, job, results)
	}
	return ws, err
}

// QueuedItems returns, by job, how many items wait in its queue or are
// being processed, from one look at the work stream holding owner's jobs
// (which holds other owners' too when every job shares one).
func (q Queues) QueuedItems(ctx context.Context, owner string) (map[string]int, error) {
	c := q.c
	name, err := c.WorkStream(ctx, owner)
	if err != nil {
		return nil, err
	}
	info, err := c.queuedIn(ctx, name)
	if err != nil || info == nil {
		return nil, err
	}
	out := make(map[string]int, len(info.State.Subjects))
	for subject, n := range info.State.Subjects {
		out[c.prefix.SubjectJob(subject)] = int(n)
	}
	return out, nil
}

// ResultCount returns how many of job's items have a result.
func (box Outputs) ResultCount(ctx context.Context, job string) (int, error) {
	c := box.c
	results, err := c.subjectCounts(ctx, resultsFamily, c.prefix.JobResults(job))
	return len(results), err
}

// deadItems counts job's items with a dead letter and no result in
// results (counts per result subject), once each however many letters they
// have, and its letters of unreadable messages; and, apart, its refused
// items' letters. A letter can outlive its item's result: the item
// succeeded late, or a redrive was interrupted before it removed the
// letter. It reads every letter of job, which a job without dead letters
// is spared.
func (c *Client) deadItems(ctx context.Context, job string, results map[string]uint64) (dead, refused int, err error) {
	seen := map[string]bool{}
	for l, err := range c.Letters().List(ctx, DeadItems, job, false) {
		if err != nil {
			return 0, 0, fmt.Errorf("dead letters of %s: %w", job, err)
		}
		switch {
		case l.Reason == schemas.NeverQueued: // a result, set aside: never an item of the job
		case l.Reason == schemas.RefusedItem:
			refused++
		case l.ItemID == "":
			dead++
		case !seen[l.ItemID] && results[c.prefix.Results(job, l.ItemID)] == 0:
			seen[l.ItemID] = true
			dead++
		}
	}
	return dead, refused, nil
}

func (c *Client) subjectCounts(ctx context.Context, family schemas.Stream, filter string) (map[string]uint64, error) {
	st, err := c.Stream(ctx, family)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("stream %s subjects %s: %w", family, filter, err)
	}
	return info.State.Subjects, nil
}

// EnsureWork creates or updates the job's work consumer from its record's
// spec, so that pushed items wait for workers with the job's lease and
// delivery limit.
func (q Queues) EnsureWork(ctx context.Context, rec *schemas.JobRecord) error {
	c := q.c
	_, err := c.ensureWorkConsumer(ctx, rec)
	return err
}

// DropQueued takes job's items that wait in the main queue off it and
// discards them, and returns how many. Items held by workers are not
// touched: they finish (or fail) normally. It uses the job's own consumer,
// so an item that a worker fetches meanwhile is processed, not dropped.
func (q Queues) DropQueued(ctx context.Context, job string) (int, error) {
	c := q.c
	stream, err := c.jobWorkStream(ctx, job)
	if err != nil {
		return 0, err
	}
	cons, err := c.jobConsumer(ctx, stream, job)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("drop queued items of %s: %w", job, err)
	}
	dropped := 0
	for {
		n := 0
		for msg, err := range consume.Fetch(ctx, cons, consume.Pull{Max: 1000}) {
			if err != nil {
				return dropped, fmt.Errorf("drop queued items of %s: %w", job, err)
			}
			n++
			if err := msg.Ack(); err != nil {
				return dropped, fmt.Errorf("drop queued item of %s: %w", job, err)
			}
		}
		dropped += n
		if n == 0 {
			return dropped, nil
		}
	}
}

// purgeWork removes every item of job from the work stream, held ones too.
func (c *Client) purgeWork(ctx context.Context, job string) error {
	stream, err := c.jobWorkStream(ctx, job)
	if err != nil {
		return err
	}
	st, err := c.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(c.prefix.Work(job))); err != nil {
		return fmt.Errorf("purge items of %s: %w", job, err)
	}
	return nil
}

// ReleaseWork removes all of job's items, held ones too, and deletes its
// work consumer: workers of the job find nothing more to do.
func (q Queues) ReleaseWork(ctx context.Context, job string) error {
	c := q.c
	if err := c.purgeWork(ctx, job); err != nil {
		return err
	}
	return c.Queues().DeleteWorkConsumer(ctx, job)
}

// DeleteWorkConsumer deletes job's work consumer, leaving its items on the
// work stream: the manager moves the items a finished job still has to its
// dead letters (RefuseWork) rather than purge them. One already gone is no
// error. A user's work stream takes no more items of the job.
func (q Queues) DeleteWorkConsumer(ctx context.Context, job string) error {
	c := q.c
	stream, err := c.jobWorkStream(ctx, job)
	if err != nil {
		return err
	}
	return c.refuseWork(ctx, stream, job)
}

// PurgeJob deletes everything stored about job: its items, results, dead
// letters (with the bodies they keep in the dead-letter object store),
// metrics, decisions, logs, events and record.
func (q Queues) PurgeJob(ctx context.Context, job string) error {
	c := q.c
	if err := c.Queues().ReleaseWork(ctx, job); err != nil {
		return err
	}
	for family, subject := range map[schemas.Stream]string{
		resultsFamily: c.prefix.JobResults(job), ledgerFamily: c.prefix.JobLedger(job), deadFamily: c.prefix.Dead(job),
		metricsFamily: c.prefix.Metrics(job, "*"), decisionsFamily: c.prefix.Decisions(job),
		logsFamily: c.prefix.Logs(job), jobsFamily: c.prefix.Jobs(job, "*"),
	} {
		st, err := c.Stream(ctx, family)
		if err != nil {
			return err
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			return fmt.Errorf("purge %s: %w", subject, err)
		}
	}
	kv, err := c.jobsKV(ctx)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, job); err != nil {
		return fmt.Errorf("delete job record %s: %w", job, err)
	}
	return c.purgeLetterObjects(ctx, job) // after their letters: none names a missing object
}
