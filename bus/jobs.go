package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// Jobs is a Client's jobs role: submitting and commanding jobs through the
// manager (Submit, Stop, Terminate), their records in the jobs bucket
// (Status, Get, List, Update, Fail) and their lifecycle events (Events,
// Watch, PublishEvent, RecordEvent, and the unreadable ones set aside).
type Jobs struct{ c *Client }

// Jobs returns c's jobs role.
func (c *Client) Jobs() Jobs { return Jobs{c} }

// ErrJobNotFound is returned by Status, Get and Update for an unknown job.
var ErrJobNotFound = errors.New("job not found")

// defaultRequestTimeout bounds request/reply calls whose ctx has no deadline.
const defaultRequestTimeout = 30 * time.Second

// CallOption configures Submit, Stop and Terminate.
type CallOption func(*nats.Msg) error

// WithToken sends a bearer token that the manager checks against its token
// file, as the HTTP API does.
func WithToken(token string) CallOption {
	return func(m *nats.Msg) error {
		if token == "" {
			return fmt.Errorf("%w: empty token", ErrInvalidOption)
		}
		m.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// WithContentType names the submitted document's format, e.g.
// "application/yaml"; the default is JSON.
func WithContentType(ct string) CallOption {
	return func(m *nats.Msg) error { m.Header.Set("Content-Type", ct); return nil }
}

// SubmitReply is the manager's answer to a submission or a job command.
type SubmitReply struct {
	JobID string `json:"job_id"`
	State string `json:"status,omitempty"`
}

// Submit sends a job document (Pace's spec as JSON or YAML, or an
// Asperathos kubejobs submission) to the manager on pace.submit and returns
// the new job's id. A refused document returns a *schemas.APIError whose
// Details name every invalid field, as the HTTP API does.
func (j Jobs) Submit(ctx context.Context, doc []byte, opts ...CallOption) (string, error) {
	c := j.c
	r, err := c.call(ctx, c.prefix.Submit(), doc, opts)
	if err != nil {
		return "", err
	}
	return r.JobID, nil
}

// Stop asks the manager to stop job: no new items are taken, items in
// flight finish. It returns once the stop is recorded, not when it is done;
// use Watch to wait. Errors are *schemas.APIError for refusals.
func (j Jobs) Stop(ctx context.Context, job string, opts ...CallOption) error {
	c := j.c
	_, err := c.call(ctx, c.prefix.Control("stop"), jobRef(job), opts)
	return err
}

// Terminate asks the manager to end job at once and delete its workers.
func (j Jobs) Terminate(ctx context.Context, job string, opts ...CallOption) error {
	c := j.c
	_, err := c.call(ctx, c.prefix.Control("terminate"), jobRef(job), opts)
	return err
}

func jobRef(job string) []byte {
	b, _ := json.Marshal(SubmitReply{JobID: job})
	return b
}

func (c *Client) call(ctx context.Context, subject string, data []byte, opts []CallOption) (*SubmitReply, error) {
	var r SubmitReply
	if err := c.callInto(ctx, subject, data, opts, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Fail asks the manager to fail job, with reason, if it is running (on
// pace.control.fail; on a bus that authenticates, only Pace's stages may).
// It is how a runtime that sees a job's workers break applies the job's
// failure policy.
func (j Jobs) Fail(ctx context.Context, job, reason string) error {
	c := j.c
	data, _ := json.Marshal(FailRequest{JobID: job, Reason: reason})
	_, err := c.call(ctx, c.prefix.Control("fail"), data, nil)
	return err
}

// FailRequest is the body of pace.control.fail.
type FailRequest struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason"`
}

// callInto sends a request to the manager, with the connection's token,
// and decodes its answer into reply; an error answer is a
// *schemas.APIError.
func (c *Client) callInto(ctx context.Context, subject string, data []byte, opts []CallOption, reply any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	if c.token != "" {
		msg.Header.Set("Authorization", "Bearer "+c.token)
	}
	for _, opt := range opts {
		if err := opt(msg); err != nil {
			return err
		}
	}
	resp, err := c.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%s: no manager is listening (is 'pace up' running?): %w", subject, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	var apiErr schemas.APIError
	if json.Unmarshal(resp.Data, &apiErr) == nil && apiErr.Code != 0 {
		return &apiErr
	}
	if err := json.Unmarshal(resp.Data, reply); err != nil {
		return fmt.Errorf("%s: unreadable reply: %w", subject, err)
	}
	return nil
}

// ListSeen returns the jobs whose owner sees accepts: a caller's view of
// List (its own jobs, or every job for an admin).
func (j Jobs) ListSeen(ctx context.Context, sees func(owner string) bool) ([]*schemas.JobRecord, error) {
	all, err := j.List(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(rec *schemas.JobRecord) bool { return !sees(rec.Spec.Owner) }), nil
}

// StatusSeen is a caller's view of Status: a job whose owner sees refuses
// is ErrJobNotFound too, so that its existence is not revealed.
func (j Jobs) StatusSeen(ctx context.Context, job string, sees func(owner string) bool) (*schemas.JobRecord, error) {
	rec, err := j.Status(ctx, job)
	if err == nil && !sees(rec.Spec.Owner) {
		return nil, fmt.Errorf("%w: %s", ErrJobNotFound, job)
	}
	return rec, err
}

// Status returns job's current record. It returns ErrJobNotFound for an
// unknown job.
func (j Jobs) Status(ctx context.Context, job string) (*schemas.JobRecord, error) {
	c := j.c
	rec, _, err := c.Jobs().Get(ctx, job)
	return rec, err
}

// Job returns job's record and its revision in the jobs bucket. A record
// that cannot be decoded returns an error wrapping ErrMalformed, with its
// revision.
func (j Jobs) Get(ctx context.Context, job string) (*schemas.JobRecord, uint64, error) {
	c := j.c
	if !schemas.ValidToken(job) {
		return nil, 0, fmt.Errorf("job %q: %w", job, ErrJobNotFound)
	}
	kv, err := c.jobsKV(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, job)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("job %s: %w", job, ErrJobNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read job %s: %w", job, err)
	}
	var rec schemas.JobRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, e.Revision(), fmt.Errorf("%w: job record %s: %w", ErrMalformed, job, err)
	}
	return &rec, e.Revision(), nil
}

// Jobs returns every readable job record, in no particular order. One
// that cannot be decoded is logged and left out: it must not hide the
// others (Update replaces it).
//
// The records come in one pass over the bucket (its latest value per key),
// not one request per job, and a pass is used again until the bucket
// changes: an idle manager lists a thousand jobs every second. A watch of
// the bucket tells this client of others' writes (its own it counts as it
// makes them), so that a listing of an unchanged bucket asks nothing of
// the server; every jobsRecheck, and while the watch is down, the bucket's
// state (its first and last sequence and message count, which any write
// or removal moves) is read to be sure. A record unchanged since the last
// pass is not decoded again. The slice is the caller's own; the records
// are shared with every other caller, and must not change (copy one to
// change it): copying a thousand records on every pass was most of an
// idle manager's garbage.
func (j Jobs) List(ctx context.Context) ([]*schemas.JobRecord, error) {
	c := j.c
	kv, err := c.jobsKV(ctx)
	if err != nil {
		return nil, err
	}
	c.watchJobs(kv)
	seen, now := c.jobsSeen.Load(), c.clk.Now() // read before the pass: a change after it shows next time
	c.kvMu.Lock()
	last := c.listed
	c.kvMu.Unlock()
	if last.records != nil && c.watching.Load() && last.seen == seen && now.Sub(last.checked) < jobsRecheck {
		return last.shared(), nil
	}
	state, err := bucketStateOf(ctx, kv)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if last.state == state && last.records != nil {
		last.seen, last.checked = seen, now
		c.kvMu.Lock()
		c.listed = last
		c.kvMu.Unlock()
		return last.shared(), nil
	}
	next := jobListing{state: state, seen: seen, checked: now, byKey: make(map[string]decodedRecord, len(last.byKey))}
	for e, err := range consume.Watch(ctx, kv, ">", jetstream.IgnoreDeletes()) {
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		if e == nil { // every stored record has come
			if next.records == nil {
				next.records = []*schemas.JobRecord{}
			}
			c.kvMu.Lock()
			c.listed = next
			c.kvMu.Unlock()
			return next.shared(), nil
		}
		d, ok := last.byKey[e.Key()]
		if !ok || d.revision != e.Revision() {
			d = decodedRecord{revision: e.Revision(), rec: new(schemas.JobRecord)}
			if err := json.Unmarshal(e.Value(), d.rec); err != nil {
				c.log.Warn("unreadable job record left out", "job", e.Key(), "err", err)
				continue
			}
		}
		next.byKey[e.Key()] = d
		next.records = append(next.records, d.rec)
	}
	return nil, fmt.Errorf("list jobs: %w", ctx.Err())
}

// jobsRecheck is how long Jobs trusts its watch of the jobs bucket alone.
const jobsRecheck = 30 * time.Second

// jobListing is what a pass of Jobs read: the records in their order and
// by key, and before the pass the bucket's state, the changes the client
// knew of and the time.
type jobListing struct {
	state   bucketState
	seen    uint64
	checked time.Time
	records []*schemas.JobRecord
	byKey   map[string]decodedRecord
}

// watchJobs starts the watch of the jobs bucket that counts others'
// writes in jobsSeen, unless it runs. It ends with the client (Close) or
// the connection, or when the server ends it; the next Jobs starts it
// again.
func (c *Client) watchJobs(kv jetstream.KeyValue) {
	if !c.watching.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for _, err := range consume.Watch(c.life, kv, ">", jetstream.UpdatesOnly(), jetstream.MetaOnly()) {
			if err != nil {
				break
			}
			c.jobsSeen.Add(1)
		}
		c.watching.Store(false)
		c.jobsSeen.Add(1)
	}()
}

// countedKV is the jobs bucket, counting in seen each write made through
// it, so that Jobs knows of this client's own writes at once.
type countedKV struct {
	jetstream.KeyValue
	seen *atomic.Uint64
}

func (kv countedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	defer kv.seen.Add(1)
	return kv.KeyValue.Create(ctx, key, value, opts...)
}

func (kv countedKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	defer kv.seen.Add(1)
	return kv.KeyValue.Update(ctx, key, value, rev)
}

func (kv countedKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	defer kv.seen.Add(1)
	return kv.KeyValue.Put(ctx, key, value)
}

func (kv countedKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	defer kv.seen.Add(1)
	return kv.KeyValue.Delete(ctx, key, opts...)
}

func (kv countedKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	defer kv.seen.Add(1)
	return kv.KeyValue.Purge(ctx, key, opts...)
}

// shared returns the records in a slice of the caller's own.
func (l jobListing) shared() []*schemas.JobRecord { return slices.Clone(l.records) }

// decodedRecord is a job record as Jobs decoded it from a revision.
type decodedRecord struct {
	revision uint64
	rec      *schemas.JobRecord
}

// bucketState is what changes in a bucket's stream whenever a value is
// written, deleted or expires.
type bucketState struct{ first, last, msgs uint64 }

func bucketStateOf(ctx context.Context, kv jetstream.KeyValue) (bucketState, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return bucketState{}, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return bucketState{}, fmt.Errorf("bucket status of type %T", st)
	}
	s := bs.StreamInfo().State
	return bucketState{first: s.FirstSeq, last: s.LastSeq, msgs: s.Msgs}, nil
}

// Update applies fn to job's record and stores it with compare-and-set,
// retrying on a concurrent update. A nil record is passed for a job that
// does not exist, and for one whose record cannot be decoded, so that fn
// may build it anew (the manager replays the job's events) and replace it;
// fn returning nil, nil leaves the bucket unchanged.
func (j Jobs) Update(ctx context.Context, job string, fn func(*schemas.JobRecord) (*schemas.JobRecord, error)) (*schemas.JobRecord, error) {
	c := j.c
	kv, err := c.jobsKV(ctx)
	if err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		cur, rev, err := c.Jobs().Get(ctx, job)
		if err != nil && !errors.Is(err, ErrJobNotFound) && !errors.Is(err, ErrMalformed) {
			return nil, err
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return cur, err
		}
		data, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode job %s: %w", job, err)
		}
		if rev == 0 {
			_, err = kv.Create(ctx, job, data)
		} else {
			_, err = kv.Update(ctx, job, data, rev)
		}
		if Conflict(err) {
			continue // a concurrent writer won; apply fn to its record
		}
		if err != nil {
			return nil, fmt.Errorf("update job %s: %w", job, err)
		}
		return next, nil
	}
	return nil, fmt.Errorf("update job %s: %w", job, ctx.Err())
}

// jobsKV returns the jobs bucket, opened once: opening asks the server for
// the bucket's stream, a request a job check per job would repeat.
func (c *Client) jobsKV(ctx context.Context) (jetstream.KeyValue, error) {
	c.kvMu.Lock()
	defer c.kvMu.Unlock()
	if c.jobs != nil {
		return c.jobs, nil
	}
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(jobsBucket))
	if err != nil {
		return nil, fmt.Errorf("open jobs bucket (was the bus provisioned?): %w", err)
	}
	c.jobs = countedKV{KeyValue: kv, seen: &c.jobsSeen}
	return c.jobs, nil
}

// PublishEvent stores a lifecycle event on pace.jobs.<job>.<type> and
// returns its stream sequence.
func (j Jobs) PublishEvent(ctx context.Context, ev *schemas.JobEvent) (uint64, error) {
	c := j.c
	msg, err := NewMsg(ctx, c.prefix.Jobs(ev.Job, ev.Type), ev)
	if err != nil {
		return 0, err
	}
	ack, err := c.js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, fmt.Errorf("publish %s event of %s: %w", ev.Type, ev.Job, err)
	}
	return ack.Sequence, nil
}

// RecordEvent publishes ev, then applies it to its job's record with
// schemas.ApplyEvent and compare-and-set: the record follows the event
// stream (its Seq is the last event applied), whoever writes the event. It
// returns the record after ev, or an error when the event was stored but
// the job has no readable record (the manager's Recover rebuilds it).
func (j Jobs) RecordEvent(ctx context.Context, ev *schemas.JobEvent) (*schemas.JobRecord, error) {
	c := j.c
	seq, err := c.Jobs().PublishEvent(ctx, ev)
	if err != nil {
		return nil, err
	}
	rec, err := c.Jobs().Update(ctx, ev.Job, func(cur *schemas.JobRecord) (*schemas.JobRecord, error) {
		return schemas.ApplyEvent(cur, ev, seq), nil
	})
	if err == nil && rec == nil { // deleted meanwhile, or its record unreadable
		err = fmt.Errorf("%s event of %s stored, but the job has no readable record", ev.Type, ev.Job)
	}
	return rec, err
}

// JobEvent is a stored lifecycle event and its stream sequence.
type JobEvent struct {
	*schemas.JobEvent
	Seq uint64
}

// Events iterates over the stored lifecycle events of job ("" for every
// job) from the oldest, and ends when it has read them all unless follow is
// set. Undecodable events are skipped, each kept once as a dead letter on
// pace.metrics.<job>.dead and counted (see MalformedEvents).
func (j Jobs) Events(ctx context.Context, job string, follow bool) iter.Seq2[JobEvent, error] {
	c := j.c
	filter := c.prefix.Jobs("*", "*")
	if job != "" {
		filter = c.prefix.Jobs(job, "*")
	}
	return func(yield func(JobEvent, error) bool) {
		for msg, err := range c.read(ctx, jobsFamily, filter, allRead(follow)) {
			if err != nil {
				yield(JobEvent{}, fmt.Errorf("read job events: %w", err))
				return
			}
			ev, err := Decode[schemas.JobEvent](msg.Data(), msg.Headers())
			if err != nil {
				c.Jobs().SetAsideEvent(ctx, msg, err)
				continue
			}
			var seq uint64
			if md, err := msg.Metadata(); err == nil {
				seq = md.Sequence.Stream
			}
			if !yield(JobEvent{ev, seq}, nil) {
				return
			}
		}
	}
}

// Watch iterates over job's lifecycle events, the stored ones first,
// and ends after the event that puts the job in a final state (or when ctx
// ends, with ctx's error).
func (j Jobs) Watch(ctx context.Context, job string) iter.Seq2[*schemas.JobEvent, error] {
	c := j.c
	return func(yield func(*schemas.JobEvent, error) bool) {
		for ev, err := range c.Jobs().Events(ctx, job, true) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev.JobEvent, nil) || ev.State.Final() {
				return
			}
		}
		if ctx.Err() != nil {
			yield(nil, fmt.Errorf("watch %s: %w", job, ctx.Err()))
		}
	}
}
