package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// ErrHasResult is returned by Letters.Redrive for the letter of an item that
// already has a result (it succeeded after it was dead-lettered, or was
// redriven before): nothing is sent and the letter is removed.
var ErrHasResult = errors.New("item already has a result")

// Redrive publishes the message of letter l (as List or Get returned
// it) again, to be worked on anew, then removes the letter: a letter is
// redriven once, and an item counts as dead only while it has a letter.
// A malformed message goes back as it was kept (Raw, or the object
// RawObject names, and Header, to Subject), presumably after fixing what
// made it unreadable; an item that used up its deliveries goes back as the
// same item (id and payload) on its job's queue, which must still be
// running (ErrJobFinished otherwise). A refused item (published to a job
// that did not accept items) goes back as it was kept, to its job, which
// must now accept items (ErrJobFinished otherwise; a job that still does
// not exist is created as a streaming job, as PushItems creates it).
//
// The letter is removed only once the server has acknowledged the message,
// so nothing is lost; then the object keeping its body, if any (a redrive
// that finds the letter gone deletes l's object, should an earlier one
// have failed to). The message's Nats-Msg-Id names the letter (the dead
// message's own id is left out: JetStream would discard the message as its
// duplicate), so that redriving a letter again after its removal failed
// sends nothing more within the stream's 2-minute de-duplication window; an
// item whose letter outlives its result is not sent again (ErrHasResult). A
// letter that is no longer stored returns ErrLetterNotFound.
func (box Letters) Redrive(ctx context.Context, l *StoredLetter) error {
	c := box.c
	stream, _, err := c.letterStream(ctx, l.Store)
	if err != nil {
		return err
	}
	cur, err := c.Letters().Get(ctx, l.Store, l.Seq)
	if errors.Is(err, ErrLetterNotFound) && l.DeadLetter != nil && l.RawObject != "" {
		// Gone, perhaps by a redrive that failed to delete its body after.
		if derr := c.deleteLetterObject(ctx, l.DeadLetter); derr != nil {
			return errors.Join(err, derr)
		}
	}
	if err != nil {
		return err
	}
	d := cur.DeadLetter
	if errs := d.Validate(); len(errs) > 0 {
		return fmt.Errorf("%w: dead_letter: %w", ErrMalformed, errs.ToAggregate())
	}
	var msg *nats.Msg
	switch {
	case d.Reason == schemas.RefusedItem && (d.Raw != nil || d.RawObject != "") && d.Subject == c.prefix.Work(d.Job):
		rec, err := c.OpenJob(ctx, d.Job)
		if err != nil {
			return err
		}
		if rec.State.Final() || rec.StopRequested {
			return fmt.Errorf("redrive to %s: %w (%s)", d.Job, ErrJobFinished, rec.State)
		}
		fallthrough
	case d.Reason == schemas.Malformed && (d.Raw != nil || d.RawObject != "") && d.Subject != "":
		if !c.redrivableTo(l.Store, d) {
			return fmt.Errorf("%w: a malformed message of job %s kept in %s is not redriven to %s", ErrMalformed,
				d.Job, l.Store, d.Subject)
		}
		body, err := c.Letters().Body(ctx, d)
		if err != nil {
			return err
		}
		msg = &nats.Msg{Subject: d.Subject, Data: body, Header: nats.Header{}}
		for k, v := range d.Header {
			msg.Header[k] = slices.Clone(v)
		}
	case d.Reason == schemas.MaxDeliveries && d.ItemID != "":
		rec, err := c.OpenJob(ctx, d.Job)
		if err != nil {
			return err
		}
		if rec.State.Final() || rec.StopRequested {
			return fmt.Errorf("redrive to %s: %w (%s)", d.Job, ErrJobFinished, rec.State)
		}
		done, err := c.hasResult(ctx, d.Job, d.ItemID)
		if err != nil {
			return err
		}
		if done {
			if err := c.removeLetter(ctx, stream, l.Seq, d); err != nil {
				return fmt.Errorf("item %s of %s: %w; %w", d.ItemID, d.Job, ErrHasResult, err)
			}
			return fmt.Errorf("item %s of %s: %w", d.ItemID, d.Job, ErrHasResult)
		}
		item := &schemas.WorkItem{ID: d.ItemID, Job: d.Job, Payload: d.Payload, CreatedAt: c.clk.Now()}
		if msg, err = NewMsg(MessageContext(ctx, d.Header), c.prefix.Work(d.Job), item); err != nil {
			return err
		}
	case d.Reason == schemas.NeverQueued:
		return fmt.Errorf("dead letter of %s (sequence %d): a result for an item the job never had is not redriven; delete it",
			d.Job, d.Sequence)
	default:
		return fmt.Errorf("%w: dead letter of %s (sequence %d) keeps no message to redrive (a version 1 malformed letter?)",
			ErrMalformed, d.Job, d.Sequence)
	}
	msg.Header.Set(schemas.HeaderMsgID, fmt.Sprintf("pace-redrive/%s/%d", stream.CachedInfo().Config.Name, l.Seq))
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("redrive to %s: %w", msg.Subject, err)
	}
	if err := c.removeLetter(ctx, stream, l.Seq, d); err != nil {
		return fmt.Errorf("redriven to %s, but %w (redrive it again to remove it)", msg.Subject, err)
	}
	return nil
}

// Delete deletes the dead letter at sequence seq of store's stream,
// then the object that keeps its body, if any: an operator's way to drop a
// letter that is not to be redriven, such as one whose object is missing.
// A stored message that is not a readable dead letter (a newer version's,
// or junk) is deleted too; the object it may name is left to
// Sweep. A sequence that holds no letter returns
// ErrLetterNotFound.
func (box Letters) Delete(ctx context.Context, store LetterStore, seq uint64) error {
	c := box.c
	stream, _, err := c.letterStream(ctx, store)
	if err != nil {
		return err
	}
	d := &schemas.DeadLetter{} // an unreadable letter's: names no object
	l, err := c.Letters().Get(ctx, store, seq)
	switch {
	case err == nil:
		d = l.DeadLetter
	case !errors.Is(err, ErrMalformed):
		return err
	}
	return c.removeLetter(ctx, stream, seq, d)
}

// removeLetter deletes letter d, at seq in stream, then the object that
// keeps its body, if any: in this order, so that a letter never names a
// missing object. A letter or object already gone is no error.
func (c *Client) removeLetter(ctx context.Context, stream jetstream.Stream, seq uint64, d *schemas.DeadLetter) error {
	err := stream.DeleteMsg(ctx, seq)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("letter %d not removed from %s: %w", seq, stream.CachedInfo().Config.Name, err)
	}
	if err := c.deleteLetterObject(ctx, d); err != nil {
		return fmt.Errorf("letter %d removed from %s, its body left behind: %w", seq, stream.CachedInfo().Config.Name, err)
	}
	return nil
}

// hasResult reports whether item of job has a result.
func (c *Client) hasResult(ctx context.Context, job, item string) (bool, error) {
	stream, err := c.Stream(ctx, resultsFamily)
	if err != nil {
		return false, err
	}
	_, err = stream.GetLastMsgForSubject(ctx, c.prefix.Results(job, item))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("result of %s/%s: %w", job, item, err)
	}
	return true, nil
}

// redrivableTo reports whether a malformed message kept in store may go back
// to its subject: a work item to its job's queue (the letters of work items
// are written by the job's workers, which its owner may be), any other
// message (kept by Pace's stages) to one of its job's subjects. A letter is
// never a way to have whoever redrives it publish elsewhere.
func (c *Client) redrivableTo(store LetterStore, d *schemas.DeadLetter) bool {
	if store == DeadItems {
		return d.Subject == c.prefix.Work(d.Job)
	}
	return c.prefix.SubjectJob(d.Subject) == d.Job
}
