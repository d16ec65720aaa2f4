package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/pace-platform/pace/schemas"
)

// Errors returned by the work-queue calls.
var (
	// ErrJobFinished is returned by PushItems and Worker.Run for a job that
	// is completed, stopped or failed.
	ErrJobFinished = errors.New("job is finished")
	// ErrBatchWorkload is returned by PushItems for a batch job: its items
	// are its workload, queued at submission, and a result for any other
	// item would be set aside (schemas.NeverQueued).
	ErrBatchWorkload = errors.New("a batch job takes no pushed items: its items are the workload given at submission")
	// ErrDuplicateResult is returned by PublishResult when the item already
	// has a result; the new one is discarded.
	ErrDuplicateResult = errors.New("item already has a result")
)

// Items wraps payloads as work items without ids; PushItems assigns them.
func Items(payloads ...string) []schemas.WorkItem {
	items := make([]schemas.WorkItem, len(payloads))
	for i, p := range payloads {
		items[i].Payload = p
	}
	return items
}

// PushItems publishes items to job's main queue, in order, and waits until
// the server has stored each; a few thousand are on their way at a time,
// so a large push holds no more than that. Items without an ID get a
// unique one, written back into items; an ID already pushed within the
// last two minutes is stored once. A job that does not exist yet is created as a streaming job
// with default settings; a batch job takes none (ErrBatchWorkload).
//
// On error some items may have been stored: pushing the same items again
// (with the ids now assigned) stores only the missing ones.
func (c *Client) PushItems(ctx context.Context, job string, items []schemas.WorkItem) error {
	rec, err := c.OpenJob(ctx, job)
	if err != nil {
		return err
	}
	if rec.State.Final() || rec.StopRequested {
		why := string(rec.State)
		if rec.StopRequested {
			why += ", stop requested"
		}
		return fmt.Errorf("push to %s: %w (%s)", job, ErrJobFinished, why)
	}
	if rec.Spec.Mode == schemas.Batch {
		return fmt.Errorf("push to %s: %w", job, ErrBatchWorkload)
	}
	subject, h := c.prefix.Work(job), messageHeader(ctx, &schemas.WorkItem{})
	now := c.clk.Now()
	window := newPublishWindow(ctx)
	var sendErr error
	for i := range items {
		if window.failed() != nil {
			break
		}
		it := &items[i]
		if it.ID == "" {
			it.ID = nuid.Next()
		}
		it.Job = job
		if it.CreatedAt.IsZero() {
			it.CreatedAt = now
		}
		msg, err := newMsg(subject, it, maps.Clone(h))
		if err != nil {
			sendErr = fmt.Errorf("item %d: %w", i, err)
			break
		}
		msg.Header[schemas.HeaderMsgID] = []string{job + "/" + it.ID}
		f, err := c.js.PublishMsgAsync(msg, stallWait)
		if err != nil {
			sendErr = fmt.Errorf("push item %s: %w", it.ID, err)
			break
		}
		window.add(f)
	}
	if err := window.wait(); err != nil && sendErr == nil {
		sendErr = fmt.Errorf("push to %s: %w", job, err)
	}
	return sendErr
}

// stallWait bounds how long an asynchronous publish waits for room among
// the publishes in flight; made once, the hot path reuses it.
var stallWait = jetstream.WithStallWait(10 * time.Second)

// QueueWorkload publishes a new batch job's workload to its queue, in
// order: payload i becomes item schemas.WorkloadItemID(i+1). Unlike PushItems
// it neither opens the job (the caller has made it) nor sets message ids:
// its caller never retries it but removes the job's items when it fails, so
// the server need not remember an id per item for its duplicate window (for
// 1,000,000 items, over 100 MB for two minutes). When it returns, nothing
// it sent is still on its way to the stream, where it would outlive a removal.
func (c *Client) QueueWorkload(ctx context.Context, job string, payloads []string) error {
	subject, h, now := c.prefix.Work(job), messageHeader(ctx, &schemas.WorkItem{}), c.clk.Now()
	window := newPublishWindow(ctx)
	var sendErr error
	for i, p := range payloads {
		if window.failed() != nil {
			break
		}
		msg, err := newMsg(subject, &schemas.WorkItem{ID: schemas.WorkloadItemID(i + 1), Job: job, Payload: p, CreatedAt: now},
			maps.Clone(h))
		if err == nil {
			var f jetstream.PubAckFuture
			if f, err = c.js.PublishMsgAsync(msg, stallWait); err == nil {
				window.add(f)
				continue
			}
		}
		sendErr = fmt.Errorf("queue item %d of %s: %w", i+1, job, err)
		break
	}
	if err := window.wait(); err != nil && sendErr == nil {
		sendErr = fmt.Errorf("queue the workload of %s: %w", job, err)
	}
	return sendErr
}

// OpenJob returns job's record, creating an implicit streaming job when it
// does not exist, and makes sure its work consumer matches its spec.
//
// A connection authenticated with a token (WithTokenAuth) may not write job
// records or create consumers, and may reach only the jobs its user owned
// when it connected: for a job it cannot read, or whose work consumer is
// missing, OpenJob asks the manager to declare it (pace.control.declare:
// created for this user with its work consumer, or confirmed as theirs),
// then reconnects, so that the server grants the connection the job.
func (c *Client) OpenJob(ctx context.Context, job string) (_ *schemas.JobRecord, err error) {
	if !schemas.ValidToken(job) {
		return nil, fmt.Errorf("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	}
	rec, err := c.openJob(ctx, job)
	if c.token != "" && (errors.Is(err, ErrNotPermitted) || errors.Is(err, jetstream.ErrConsumerNotFound)) {
		if _, err := c.call(ctx, c.prefix.Control("declare"), jobRef(job), nil); err != nil {
			return nil, fmt.Errorf("open job %s: %w", job, err)
		}
		if errors.Is(err, ErrNotPermitted) {
			if err := c.reconnect(ctx); err != nil {
				return nil, fmt.Errorf("open job %s: %w", job, err)
			}
		}
		rec, err = c.openJob(ctx, job)
	}
	return rec, err
}

// openJob is OpenJob on this connection's current permissions.
func (c *Client) openJob(ctx context.Context, job string) (_ *schemas.JobRecord, err error) {
	ctx, done := c.guard(ctx)
	defer func() { err = notPermitted(ctx, err); done() }()
	kv, err := c.jobsKV(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := getJob(ctx, kv, job)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		now := c.clk.Now()
		rec = &schemas.JobRecord{ID: job, Spec: schemas.JobSpec{Mode: schemas.Streaming}.WithDefaults(),
			State: schemas.Ongoing, Reason: "created by its first item or worker", CreatedAt: now, StartedAt: now}
		data, _ := json.Marshal(rec)
		if _, err = kv.Create(ctx, job, data); errors.Is(err, jetstream.ErrKeyExists) {
			rec, err = getJob(ctx, kv, job)
		} else if err == nil {
			c.log.Info("streaming job created implicitly", "job", job)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open job %s: %w", job, err)
	}
	if c.token != "" { // the manager makes the work consumer: see ReadRequest
		_, err := c.workConsumer(ctx, rec)
		switch {
		case err == nil:
		case errors.Is(err, jetstream.ErrConsumerNotFound) && (rec.State.Final() || rec.StopRequested):
			// A finished job, whose callers refuse it.
		default:
			return nil, fmt.Errorf("work consumer of %s: %w", job, err)
		}
		return rec, nil
	}
	if _, err := c.ensureWorkConsumer(ctx, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// reconnect makes the connection log in again, with the permissions its
// credentials carry now, and waits until it has.
func (c *Client) reconnect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, defaultRequestTimeout)
	defer cancel()
	connected := c.nc.StatusChanged(nats.CONNECTED)
	defer c.nc.RemoveStatusListener(connected)
	if err := c.nc.ForceReconnect(); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	select {
	case <-connected:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("reconnect: %w", ctx.Err())
	}
}

// DeclareJob creates job with spec, or updates the spec of the existing
// job, and configures its work consumer accordingly. The spec is defaulted
// and validated; errors name the invalid field. It returns ErrJobFinished
// for a finished job.
func (c *Client) DeclareJob(ctx context.Context, job string, spec schemas.JobSpec) (*schemas.JobRecord, error) {
	if !schemas.ValidToken(job) {
		return nil, fmt.Errorf("job %q: must be 1-128 letters, digits, '-' or '_'", job)
	}
	spec = spec.WithDefaults()
	if errs := spec.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("job %s: %w", job, errs.ToAggregate())
	}
	kv, err := c.jobsKV(ctx)
	if err != nil {
		return nil, err
	}
	for {
		now := c.clk.Now()
		rec := &schemas.JobRecord{ID: job, Spec: spec, State: schemas.Ongoing, CreatedAt: now, StartedAt: now}
		var rev uint64
		e, err := kv.Get(ctx, job)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("declare job %s: %w", job, err)
		default:
			if err := json.Unmarshal(e.Value(), rec); err != nil {
				return nil, fmt.Errorf("decode job record %s: %w", job, err)
			}
			if rec.State.Final() {
				return nil, fmt.Errorf("declare job %s: %w (%s)", job, ErrJobFinished, rec.State)
			}
			rec.Spec, rev = spec, e.Revision()
		}
		data, _ := json.Marshal(rec)
		if rev == 0 {
			_, err = kv.Create(ctx, job, data)
		} else {
			_, err = kv.Update(ctx, job, data, rev)
		}
		if Conflict(err) {
			continue // a concurrent writer won; apply the spec on top of its record
		}
		if err != nil {
			return nil, fmt.Errorf("declare job %s: %w", job, err)
		}
		if _, err := c.ensureWorkConsumer(ctx, rec); err != nil {
			return nil, err
		}
		return rec, nil
	}
}

func getJob(ctx context.Context, kv jetstream.KeyValue, job string) (*schemas.JobRecord, error) {
	e, err := kv.Get(ctx, job)
	if err != nil {
		return nil, err
	}
	var rec schemas.JobRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("decode job record %s: %w", job, err)
	}
	return &rec, nil
}

// ensureWorkConsumer creates or updates the job's durable pull consumer: its
// AckWait is the item lease, MaxDeliver the attempts before dead-lettering.
func (c *Client) ensureWorkConsumer(ctx context.Context, rec *schemas.JobRecord) (jetstream.Consumer, error) {
	name := schemas.WorkConsumer(rec.ID)
	var cons jetstream.Consumer
	err := c.acceptWork(ctx, rec, func(stream string) (err error) {
		cons, err = c.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable:       name,
			Description:   "work items of job " + rec.ID,
			FilterSubject: c.prefix.Work(rec.ID),
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckWait:       rec.Spec.ItemTimeout.D(),
			MaxDeliver:    rec.Spec.MaxDeliveries,
			MaxAckPending: -1,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("work consumer %s: %w", name, err)
	}
	return cons, nil
}

// PublishResult stores the result of one item. The first result of an item
// wins: a later one returns ErrDuplicateResult and is discarded. The server
// refuses it (PACE_RESULTS keeps one message per subject and discards new
// ones), so a result needs no expected-sequence header.
func (c *Client) PublishResult(ctx context.Context, r *schemas.Result) error {
	msg, err := c.resultMsg(ctx, r)
	if err != nil {
		return err
	}
	ack, err := c.js.PublishMsg(ctx, msg)
	return resultStored(r, ack, err)
}

// publishResultAsync sends r without waiting for the server; the future
// says whether it was stored (see resultStored).
func (c *Client) publishResultAsync(ctx context.Context, r *schemas.Result) (jetstream.PubAckFuture, error) {
	msg, err := c.resultMsg(ctx, r)
	if err != nil {
		return nil, err
	}
	f, err := c.js.PublishMsgAsync(msg, stallWait)
	if err != nil {
		return nil, fmt.Errorf("publish result %s/%s: %w", r.Job, r.ItemID, err)
	}
	return f, nil
}

// resultMsg is r's message on pace.results.<job>.<item>. It carries no
// message id: the stream keeps one message per item, so a retried publish
// is refused like any second result, and the server keeps no id per result
// for its duplicate window.
func (c *Client) resultMsg(ctx context.Context, r *schemas.Result) (*nats.Msg, error) {
	return NewMsg(ctx, c.prefix.Results(r.Job, r.ItemID), r)
}

// resultStored turns the server's answer to a result into nil (stored),
// ErrDuplicateResult (the item already had one: the stream's one message
// per subject refused it) or the error.
func resultStored(r *schemas.Result, ack *jetstream.PubAck, err error) error {
	switch {
	case perSubjectFull(err):
		return ErrDuplicateResult
	case err != nil:
		return fmt.Errorf("publish result %s/%s: %w", r.Job, r.ItemID, err)
	case ack.Duplicate:
		return ErrDuplicateResult
	}
	return nil
}

// publishDeadLetter stores the dead letter of a work item on pace.dead.<job>.
func (c *Client) publishDeadLetter(ctx context.Context, d *schemas.DeadLetter, key string) error {
	return c.Letters().Publish(ctx, c.prefix.Dead(d.Job), d, key)
}

// Publish stores d on subject; key, when not empty, is its
// Nats-Msg-Id and makes a retried publish a no-op. pace.dead.<job> counts a
// job's dead items: letters of messages other than work items go to
// pace.metrics.<job>.dead. A Raw too large for the letter is kept in the
// dead-letter object store, which the stored letter names (RawObject).
func (box Letters) Publish(ctx context.Context, subject string, d *schemas.DeadLetter, key string) error {
	c := box.c
	_, err := c.publishLetter(ctx, subject, d, key)
	return err
}

// publishLetter is Letters.Publish; it also reports whether the bus
// dropped the letter as a duplicate of one published with the same key.
// A malformed message's body too large for the letter goes to the
// dead-letter object store first (see publishLetterObject).
func (c *Client) publishLetter(ctx context.Context, subject string, d *schemas.DeadLetter, key string) (duplicate bool, err error) {
	msg, err := NewMsg(ctx, subject, d)
	if err != nil {
		return false, err
	}
	if key != "" {
		msg.Header.Set(schemas.HeaderMsgID, key)
	}
	ack, err := c.js.PublishMsg(ctx, msg)
	if errors.Is(err, nats.ErrMaxPayload) && len(d.Raw) > 0 {
		// Refused by the client, unsent: keep the body beside the letter.
		return c.publishLetterObject(ctx, subject, d, key)
	}
	if err != nil {
		return false, fmt.Errorf("publish dead letter for %s: %w", d.Job, err)
	}
	return ack.Duplicate, nil
}
