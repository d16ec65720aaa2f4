package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// QueuedWork is what the work streams hold, by subject, as one
// stream-info request per stream reads it.
type QueuedWork struct {
	// Subjects maps each pace.work.<job> subject holding messages to how
	// many it holds (queued and in flight).
	Subjects map[string]uint64
	// Streams maps each of those subjects to the work stream holding it.
	Streams map[string]string
	// LastSeq is, by subject, its stream's last sequence at that moment:
	// every counted message has a sequence at most LastSeq.
	LastSeq map[string]uint64
}

// QueuedWork counts the work streams' messages by subject, in one request
// per stream however many jobs there are (nats.go pages through very many
// subjects).
func (q Queues) QueuedWork(ctx context.Context) (QueuedWork, error) {
	c := q.c
	w := QueuedWork{Subjects: map[string]uint64{}, Streams: map[string]string{}, LastSeq: map[string]uint64{}}
	names, err := c.workStreamNames(ctx)
	if err != nil {
		return w, err
	}
	for _, name := range names {
		info, err := c.queuedIn(ctx, name)
		if err != nil {
			return w, err
		}
		if info == nil {
			continue
		}
		for subject, n := range info.State.Subjects {
			w.Subjects[subject], w.Streams[subject], w.LastSeq[subject] = n, name, info.State.LastSeq
		}
	}
	return w, nil
}

// queuedIn reads the work stream name's state with its messages counted
// by job subject; nil when the stream is gone (an idle user's, deleted).
func (c *Client) queuedIn(ctx context.Context, name string) (*jetstream.StreamInfo, error) {
	st, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil //nolint:nilnil // no stream, nothing queued
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.prefix.Work("*")))
	if err != nil {
		return nil, fmt.Errorf("stream %s subjects: %w", name, err)
	}
	return info, nil
}

// RefuseWork moves the messages of subject (a pace.work.<job> subject)
// of the work stream name with a sequence at most upTo to the job's dead
// letters (pace.dead.<job>)
// as refused, with why as their last error, and returns how many it moved.
// It is how items published to a job that does not accept them leave the
// work stream.
//
// A work item whose id already has a result stored before it was
// queued reuses that id: it is refused too, its last error naming the
// result, for an item is processed once. One whose result was stored after
// it is not refused but deleted: it is an item processed while its
// acknowledgement was lost (a server killed mid-ack), or one the ledger
// has yet to take in, left on the stream when its job ended; its letter
// would stand for work that was done. Either is entered in the ledger
// first, so that its result counts.
//
// Each letter keeps the message byte for byte (Raw, Header, Subject; a
// body too large for its letter goes to the dead-letter object store),
// and the item's id and payload when it is a readable work item, so that
// Redrive can send it again. The letter is stored first, with a
// Nats-Msg-Id naming the message's stream sequence, and only then is the
// message deleted by sequence: a call interrupted between the two, or
// two concurrent ones, store one letter (within PACE_DEAD's 2-minute
// duplicate window) and lose nothing. A message that a worker takes and
// acknowledges meanwhile is gone when the deletion comes, which is no
// error; its letter then stands beside its result, as a letter can.
// A letter too large for the bus even without the body is logged as an
// error and its message left where it is. A user's work stream left with no
// job and no item is deleted.
func (q Queues) RefuseWork(ctx context.Context, name, subject string, upTo uint64, why string) (int, error) {
	n, err := q.c.moveRefused(ctx, name, subject, upTo, why)
	if err == nil {
		err = q.c.dropIfIdle(ctx, name)
	}
	return n, err
}

// moveRefused is RefuseWork but for the deletion of an idle stream.
func (c *Client) moveRefused(ctx context.Context, name, subject string, upTo uint64, why string) (int, error) {
	st, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	job := c.prefix.SubjectJob(subject)
	moved := 0
	for seq := uint64(1); seq <= upTo; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return moved, nil
		}
		if err != nil {
			return moved, fmt.Errorf("read %s from sequence %d: %w", subject, seq, err)
		}
		if raw.Sequence > upTo {
			return moved, nil
		}
		seq = raw.Sequence + 1
		result, err := c.processed(ctx, job, raw)
		if err != nil {
			return moved, err
		}
		letterWhy := why
		if result != nil {
			if err := c.enterProcessed(ctx, job, raw); err != nil {
				return moved, err
			}
			if !result.Time.Before(raw.Time) {
				if err := st.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
					return moved, fmt.Errorf("remove processed item %d of %s: %w", raw.Sequence, subject, err)
				}
				continue
			}
			letterWhy = fmt.Sprintf("item %s already has a result (results stream sequence %d, stored %s): an item id is processed once",
				resultItem(result.Subject), result.Sequence, result.Time.UTC().Format(time.RFC3339Nano))
		}
		d := RefusedLetter(job, raw.Subject, raw.Data, raw.Header, letterWhy, c.clk.Now())
		d.Sequence = raw.Sequence
		key := fmt.Sprintf("refused/%s/%d", name, raw.Sequence)
		_, err = c.publishLetter(MessageContext(ctx, raw.Header), c.prefix.Dead(job), d, key)
		if errors.Is(err, nats.ErrMaxPayload) {
			c.log.Error("refused item's dead letter too large for the bus; item left on the work stream",
				"job", job, "subject", subject, "seq", raw.Sequence, "err", err)
			continue
		}
		if err != nil {
			return moved, err
		}
		if err := st.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return moved, fmt.Errorf("remove refused item %d of %s: %w", raw.Sequence, subject, err)
		}
		moved++
	}
	return moved, nil
}

// enterProcessed enters raw, a processed work item of job, in the ledger.
func (c *Client) enterProcessed(ctx context.Context, job string, raw *jetstream.RawStreamMsg) error {
	it, err := Decode[schemas.WorkItem](raw.Data, raw.Header)
	if err != nil {
		return err
	}
	if _, err := c.js.Publish(ctx, c.prefix.Ledger(job, it.ID), nil); err != nil {
		return fmt.Errorf("ledger entry of %s/%s: %w", job, it.ID, err)
	}
	return nil
}

// processed returns the result of raw, a message of job's work subject,
// when it is a work item that has one, and nil otherwise.
func (c *Client) processed(ctx context.Context, job string, raw *jetstream.RawStreamMsg) (*jetstream.RawStreamMsg, error) {
	it, err := Decode[schemas.WorkItem](raw.Data, raw.Header)
	if err != nil {
		return nil, nil //nolint:nilerr,nilnil // not an item: refused as it is
	}
	st, err := c.Stream(ctx, resultsFamily)
	if err != nil {
		return nil, err
	}
	result, err := st.GetLastMsgForSubject(ctx, c.prefix.Results(job, it.ID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, nil //nolint:nilnil // no result
	case err != nil:
		return nil, fmt.Errorf("result of %s/%s: %w", job, it.ID, err)
	}
	return result, nil
}

// RefusedLetter returns the dead letter of a message published on subject
// to job, which does not accept items (why says how): the message kept
// byte for byte, and its item id and payload when it is a readable work
// item. Callers set Sequence.
func RefusedLetter(job, subject string, data []byte, h nats.Header, why string, at time.Time) *schemas.DeadLetter {
	d := MalformedLetter(job, subject, data, h, errors.New(why), at)
	d.Reason = schemas.RefusedItem
	if it, err := Decode[schemas.WorkItem](data, h); err == nil {
		d.ItemID, d.Payload = it.ID, it.Payload
	}
	return d
}
