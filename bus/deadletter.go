package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/schemas"
)

// maxErrorLength bounds the error text kept for a failing item.
const maxErrorLength = 4096

// MalformedLetter returns the dead letter of a message that could not be
// read, for cause: its subject, body and headers kept byte for byte, so
// that it can be inspected, fixed and published again as it was. Callers
// set Deliveries and Sequence when they know them.
func MalformedLetter(job, subject string, data []byte, h nats.Header, cause error, at time.Time) *schemas.DeadLetter {
	var header map[string][]string
	if len(h) > 0 {
		header = make(map[string][]string, len(h))
		for k, v := range h {
			header[k] = slices.Clone(v)
		}
	}
	return &schemas.DeadLetter{Job: job, Reason: schemas.Malformed, LastError: errorText(cause), Subject: subject,
		Raw: append([]byte{}, data...), Header: header, At: at}
}

// errorText is err's text, at most maxErrorLength bytes of it.
func errorText(err error) string {
	msg := err.Error()
	if len(msg) > maxErrorLength {
		msg = msg[:maxErrorLength]
	}
	return msg
}

// recordFailure remembers an item's last error so that its dead letter can
// name it. It is best effort: a lost record only loses the text.
func (c *Client) recordFailure(ctx context.Context, job, item string, cause error) {
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(failuresBucket))
	if err == nil {
		_, err = kv.Put(ctx, job+"."+item, []byte(errorText(cause)))
	}
	if err != nil {
		c.log.Warn("item error not recorded", "job", job, "item", item, "err", err)
	}
}

// LastFailure returns the error of job's latest failed item attempt that is
// still remembered (items being retried), or "" when there is none.
func (j Jobs) LastFailure(ctx context.Context, job string) (string, error) {
	c := j.c
	stream, err := c.js.Stream(ctx, "KV_"+c.prefix.Bucket(failuresBucket))
	if err != nil {
		return "", fmt.Errorf("failures of %s: %w", job, err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, "$KV."+c.prefix.Bucket(failuresBucket)+"."+job+".>")
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("failures of %s: %w", job, err)
	}
	return string(msg.Data), nil
}

// SetAside is how a stage deals with a message it cannot read: it keeps
// the message as a dead letter (reason malformed, the message byte for
// byte) on pace.metrics.<job>.dead, the job read from the message's
// subject ("unknown" when it names none), then terminates it, so that the
// stage goes on with the next one. Counting is the caller's; stage names
// it in the logs. A stored message that several stages set aside gets one
// letter (within PACE_METRICS's duplicate window). A body too large to
// travel in its letter is kept in the dead-letter object store, which the
// letter names. Only once the letter is stored is the message terminated:
// if the letter or its body cannot be stored, the message is asked for
// again a second later, so nothing is dropped silently.
//
// A letter that cannot fit max_payload even without the body (headers
// near max_payload themselves) can never be stored; the message is then
// terminated and logged as an error with its stream sequence. On a limits
// stream (the processor's, sinks', actuator's and controller's) it stays
// while the stream keeps it; on a work-queue stream (the gate's PACE_K8S)
// terminating deletes it, and the error log is all that is left of it.
func (c *Client) SetAside(ctx context.Context, stage string, msg jetstream.Msg, cause error) {
	d, _, err := c.keepMalformed(ctx, msg, cause)
	log := c.log.With("stage", stage, "job", d.Job, "subject", msg.Subject(), "seq", d.Sequence, "err", cause)
	switch {
	case err == nil:
		log.Warn("unreadable message dead-lettered")
		_ = msg.Term()
	case errors.Is(err, nats.ErrMaxPayload):
		log.Error("unreadable message too large to dead-letter; terminated (a limits stream keeps it, a work-queue stream deletes it)",
			"dead_letter_err", err)
		_ = msg.Term()
	default:
		log.Warn("unreadable message not dead-lettered yet, will retry", "dead_letter_err", err)
		_ = msg.NakWithDelay(time.Second)
	}
}

// keepMalformed publishes the dead letter of msg, which could not be read
// for cause, on pace.metrics.<job>.dead, the job read from msg's subject.
// Its Nats-Msg-Id is keyed by msg's stream and sequence alone, so that
// within the stream's duplicate window the bus keeps one letter per stored
// message, however many stages (or retries) set it aside; duplicate
// reports a letter it dropped as such.
func (c *Client) keepMalformed(ctx context.Context, msg jetstream.Msg, cause error) (d *schemas.DeadLetter, duplicate bool, err error) {
	job := c.prefix.SubjectJob(msg.Subject())
	d = MalformedLetter(job, msg.Subject(), msg.Data(), msg.Headers(), cause, c.clk.Now())
	key := "" // without a stream sequence, no de-duplication
	if md, err := msg.Metadata(); err == nil {
		d.Sequence, d.Deliveries = md.Sequence.Stream, int(md.NumDelivered)
		key = fmt.Sprintf("malformed/%s/%d", md.Stream, md.Sequence.Stream)
	}
	duplicate, err = c.publishLetter(MessageContext(ctx, msg.Headers()), c.prefix.Metrics(job, schemas.DeadMetrics), d, key)
	return d, duplicate, err
}

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event Pace reads.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// Move moves items that used up their deliveries from the work stream
// to pace.dead.<job>, with the reason and the last error a worker reported,
// until ctx ends. An item is deleted from the work stream only once its
// letter (and the body of a malformed one too large for it, kept in the
// dead-letter object store) is stored; until then it is tried again. Every
// hour it also deletes the objects no letter names (Sweep).
// The server announces such items with an advisory that the advisories
// stream keeps, so none is missed while this loop is down. One instance
// per installation is enough; more are safe.
func (box Letters) Move(ctx context.Context) error {
	c := box.c
	cons, err := c.js.Consumer(ctx, c.prefix.Stream(advisoriesFamily), deadLetterConsumer)
	if err != nil {
		return fmt.Errorf("dead-letter consumer (was the bus provisioned?): %w", err)
	}
	failures, err := c.js.KeyValue(ctx, c.prefix.Bucket(failuresBucket))
	if err != nil {
		return fmt.Errorf("failures bucket: %w", err)
	}
	pause := newPause(100*time.Millisecond, 5*time.Second)
	nextSweep := c.clk.Now()
	for ctx.Err() == nil {
		if !c.clk.Now().Before(nextSweep) {
			c.sweepLetterObjects(ctx)
			nextSweep = c.clk.Now().Add(letterObjectSweep)
		}
		var err error
		for msg, ferr := range consume.Fetch(ctx, cons, consume.Pull{Max: 64, Wait: consume.IdleWait}) {
			if ferr != nil {
				err = ferr
				break
			}
			if err := c.deadLetter(ctx, failures, msg.Data()); err != nil {
				c.log.Warn("dead-lettering failed, will retry", "err", err)
				_ = msg.NakWithDelay(time.Second)
				continue
			}
			_ = msg.Ack()
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("dead-letter fetch failed", "err", err)
			pause.wait(ctx)
			continue
		}
		pause.reset()
	}
	return nil
}

func (c *Client) deadLetter(ctx context.Context, failures jetstream.KeyValue, advisory []byte) error {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(advisory, &adv); err != nil || adv.StreamSeq == 0 {
		c.log.Error("unreadable max-deliveries advisory dropped", "advisory", string(advisory), "err", err)
		return nil
	}
	job, ok := schemas.WorkConsumerJob(adv.Consumer)
	if !ok || !c.isWorkStream(adv.Stream) {
		return nil // not a Pace work consumer
	}
	work, err := c.js.Stream(ctx, adv.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // deleted, with its items
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", adv.Stream, err)
	}
	raw, err := work.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Acknowledged after all (a late success): the item has its result.
		return nil
	}
	if err != nil {
		return fmt.Errorf("read item %d: %w", adv.StreamSeq, err)
	}
	var d *schemas.DeadLetter
	item, derr := Decode[schemas.WorkItem](raw.Data, raw.Header)
	if derr != nil {
		d = MalformedLetter(job, raw.Subject, raw.Data, raw.Header, derr, c.clk.Now())
	} else {
		d = &schemas.DeadLetter{Job: job, ItemID: item.ID, Reason: schemas.MaxDeliveries, Payload: item.Payload,
			Subject: raw.Subject, Header: raw.Header, At: c.clk.Now(),
			LastError: "lease expired: no worker finished the item in time"}
		if e, err := failures.Get(ctx, job+"."+item.ID); err == nil {
			d.LastError = string(e.Value())
		}
	}
	d.Deliveries, d.Sequence = int(adv.Deliveries), adv.StreamSeq
	dctx := MessageContext(ctx, raw.Header)
	err = c.publishDeadLetter(dctx, d, fmt.Sprintf("%s/seq/%d", job, adv.StreamSeq))
	if errors.Is(err, nats.ErrMaxPayload) {
		// Too large even without a malformed body (kept as an object):
		// retrying cannot help; leave the item where it is, for an operator.
		c.log.Error("dead letter too large for the bus; item left on the work stream", "job", job,
			"seq", adv.StreamSeq, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if err := work.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("remove dead item %d: %w", adv.StreamSeq, err)
	}
	if d.ItemID != "" {
		_ = failures.Delete(ctx, job+"."+d.ItemID)
	}
	c.log.Warn("item dead-lettered", "job", job, "item", d.ItemID, "deliveries", d.Deliveries, "last_error", d.LastError)
	return nil
}

// ErrLetterNotFound is returned by Letters.Get for a sequence that holds
// no dead letter.
var ErrLetterNotFound = errors.New("no dead letter at this sequence")

// LetterStore is where dead letters are kept.
type LetterStore string

const (
	// DeadItems is pace.dead.<job> in PACE_DEAD: a job's items that used up
	// their deliveries, and unreadable messages on its queue.
	DeadItems LetterStore = "dead"
	// DeadMessages is pace.metrics.<job>.dead in PACE_METRICS: other
	// messages a stage set aside (samples, progress, job records).
	DeadMessages LetterStore = "metrics"
)

// LetterStores are every store of dead letters, in the order listings read
// them.
var LetterStores = []LetterStore{DeadItems, DeadMessages}

// StoredLetter is a dead letter and where it is kept.
type StoredLetter struct {
	*schemas.DeadLetter
	Store LetterStore
	// Seq is the letter's own sequence in its store's stream; the message
	// it keeps had DeadLetter.Sequence in its own stream.
	Seq uint64
}

// ID names the letter across stores (pace dead-letters' SEQ): its
// sequence for a letter of DeadItems, its store and sequence for another
// (metrics:40).
func (l *StoredLetter) ID() string {
	if l.Store == DeadItems {
		return strconv.FormatUint(l.Seq, 10)
	}
	return string(l.Store) + ":" + strconv.FormatUint(l.Seq, 10)
}

// ParseLetterID reads a letter's ID as StoredLetter.ID writes it (dead:12
// is read as 12); an error wraps ErrInvalidOption.
func ParseLetterID(id string) (LetterStore, uint64, error) {
	store, num := DeadItems, id
	if k, n, ok := strings.Cut(id, ":"); ok {
		store, num = LetterStore(k), n
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	if err != nil || seq == 0 || !slices.Contains(LetterStores, store) {
		return "", 0, fmt.Errorf("%w: dead letter %q: want a sequence such as 12, or a store and a sequence such as metrics:40", ErrInvalidOption, id)
	}
	return store, seq, nil
}

// letterSubject is the stream family of store and its subject for job
// ("*" for every job).
func (c *Client) letterSubject(store LetterStore, job string) (family schemas.Stream, subject string, err error) {
	switch store {
	case DeadItems:
		return deadFamily, c.prefix.Dead(job), nil
	case DeadMessages:
		return metricsFamily, c.prefix.Metrics(job, schemas.DeadMetrics), nil
	}
	return "", "", fmt.Errorf("%w: dead-letter store %q: want %q or %q", ErrInvalidOption, store, DeadItems, DeadMessages)
}

// List iterates over the dead letters of job ("*" for every job) kept in
// store, oldest first, each with its sequence. Without follow it ends after
// the last stored letter; with follow it waits for new ones until ctx ends.
// A message that is not a readable dead letter is logged and skipped.
func (box Letters) List(ctx context.Context, store LetterStore, job string, follow bool) iter.Seq2[*StoredLetter, error] {
	c := box.c
	return c.letters(ctx, store, job, follow, func(subject string, seq uint64, err error) {
		c.log.Warn("undecodable dead letter skipped", "subject", subject, "seq", seq, "err", err)
	})
}

// All returns the dead letters of job ("*" for every job) in every store,
// oldest first.
func (box Letters) All(ctx context.Context, job string) ([]*StoredLetter, error) {
	var all []*StoredLetter
	for _, store := range LetterStores {
		for l, err := range box.List(ctx, store, job, false) {
			if err != nil {
				return nil, err
			}
			all = append(all, l)
		}
	}
	slices.SortStableFunc(all, func(x, y *StoredLetter) int { return x.At.Compare(y.At) })
	return all, nil
}

// letters is Letters; a message that is not a readable dead letter is
// passed to unreadable, with its subject and sequence, and skipped.
func (c *Client) letters(ctx context.Context, store LetterStore, job string, follow bool,
	unreadable func(subject string, seq uint64, err error)) iter.Seq2[*StoredLetter, error] {
	return func(yield func(*StoredLetter, error) bool) {
		family, filter, err := c.letterSubject(store, job)
		if err != nil {
			yield(nil, err)
			return
		}
		for msg, err := range c.read(ctx, family, filter, allRead(follow)) {
			if err != nil {
				yield(nil, err)
				return
			}
			md, err := msg.Metadata()
			if err != nil {
				yield(nil, fmt.Errorf("read %s: %w", filter, err))
				return
			}
			d, err := Decode[schemas.DeadLetter](msg.Data(), msg.Headers())
			if err != nil {
				unreadable(msg.Subject(), md.Sequence.Stream, err)
				continue
			}
			if !yield(&StoredLetter{DeadLetter: d, Store: store, Seq: md.Sequence.Stream}, nil) {
				return
			}
		}
	}
}

// Get returns the dead letter at sequence seq of store's stream, or
// ErrLetterNotFound when that sequence holds none (never used, deleted, or
// another kind of message).
func (box Letters) Get(ctx context.Context, store LetterStore, seq uint64) (*StoredLetter, error) {
	c := box.c
	stream, filter, err := c.letterStream(ctx, store)
	if err != nil {
		return nil, err
	}
	name := stream.CachedInfo().Config.Name
	raw, err := stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && !server.SubjectMatchesFilter(raw.Subject, filter)) {
		return nil, fmt.Errorf("%s sequence %d: %w", name, seq, ErrLetterNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s sequence %d: %w", name, seq, err)
	}
	d, err := Decode[schemas.DeadLetter](raw.Data, raw.Header)
	if err == nil && c.prefix.SubjectJob(raw.Subject) != d.Job {
		err = fmt.Errorf("%w: a letter of job %q kept on %s", ErrMalformed, d.Job, raw.Subject)
	}
	if err != nil {
		return nil, fmt.Errorf("%s sequence %d: %w", name, seq, err)
	}
	return &StoredLetter{DeadLetter: d, Store: store, Seq: seq}, nil
}

// letterStream returns the stream that keeps store's letters and their
// subject filter for every job.
func (c *Client) letterStream(ctx context.Context, store LetterStore) (jetstream.Stream, string, error) {
	family, filter, err := c.letterSubject(store, "*")
	if err != nil {
		return nil, "", err
	}
	stream, err := c.Stream(ctx, family)
	if err != nil {
		return nil, "", err
	}
	return stream, filter, nil
}
