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

// QueuedWork is what the work stream holds, by subject, as one
// stream-info request reads it.
type QueuedWork struct {
	// Subjects maps each pace.work.<job> subject holding messages to how
	// many it holds (queued and in flight).
	Subjects map[string]uint64
	// LastSeq is the stream's last sequence at that moment: every
	// counted message has a sequence at most LastSeq.
	LastSeq uint64
}

// QueuedWork counts the work stream's messages by subject, in one request
// however many jobs there are (nats.go pages through very many subjects).
func (q Queues) QueuedWork(ctx context.Context) (QueuedWork, error) {
	c := q.c
	st, err := c.Stream(ctx, workFamily)
	if err != nil {
		return QueuedWork{}, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.prefix.Work("*")))
	if err != nil {
		return QueuedWork{}, fmt.Errorf("stream %s subjects: %w", c.prefix.Stream(workFamily), err)
	}
	return QueuedWork{Subjects: info.State.Subjects, LastSeq: info.State.LastSeq}, nil
}

// RefuseWork moves the messages of subject (a pace.work.<job> subject)
// with a sequence at most upTo to the job's dead letters (pace.dead.<job>)
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
// error and its message left where it is.
func (q Queues) RefuseWork(ctx context.Context, subject string, upTo uint64, why string) (int, error) {
	c := q.c
	name := c.prefix.Stream(workFamily)
	st, err := c.Stream(ctx, workFamily)
	if err != nil {
		return 0, err
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
