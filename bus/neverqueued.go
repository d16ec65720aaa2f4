package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// Results for items a job never queued. A batch job's work is its
// workload, queued by the manager as items schemas.WorkloadItemID(1..Total);
// a streaming job's is what its ledger holds (see KeepLedger). A result for
// any other id on pace.results.<job>.* is for an item the job never had:
// the server stores it (whoever may publish the job's results may publish
// any id), but it must count for nothing. JobWork leaves it out of Results
// and counts it in NeverQueued, and SetAsideNeverQueued moves it to the
// job's dead letters.

// neverQueued reports whether the result subject of rec's job names an
// item the job does not know: not in a batch job's workload, not in a
// streaming job's ledger (entries by subject).
func (c *Client) neverQueued(rec *schemas.JobRecord, subject string, ledger map[string]uint64) bool {
	id := resultItem(subject)
	if rec.Spec.Mode == schemas.Batch {
		return !schemas.InWorkload(id, rec.Total)
	}
	return ledger[c.prefix.Ledger(rec.ID, id)] == 0
}

// resultItem returns the item id a pace.results.<job>.<item> subject names.
func resultItem(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// SetAsideNeverQueued moves the results of rec's job that are for no item
// it was queued to the job's dead letters, reason never_queued, each kept
// byte for byte with its headers, and deletes them from the results
// stream; it returns how many it moved. A streaming job's result is moved
// only once the ledger has taken in every item stored before it (see
// KeepLedger): until then it may be for an item the ledger has yet to
// enter. As RefuseWork does, it stores the letter first, with a
// Nats-Msg-Id naming the result's stream sequence, then deletes the
// result: an interrupted call loses nothing and stores one letter when it
// runs again.
func (q Queues) SetAsideNeverQueued(ctx context.Context, rec *schemas.JobRecord) (int, error) {
	c := q.c
	results, err := c.subjectCounts(ctx, resultsFamily, c.prefix.JobResults(rec.ID))
	if err != nil {
		return 0, err
	}
	ledger, err := c.ledgerOf(ctx, rec)
	if err != nil {
		return 0, err
	}
	var since time.Time // items stored before it are in the ledger
	if rec.Spec.Mode != schemas.Batch {
		stream, err := c.WorkStream(ctx, rec.Spec.Owner)
		if err != nil {
			return 0, err
		}
		if since, err = c.ledgerSince(ctx, stream); err != nil {
			return 0, err
		}
	}
	st, err := c.Stream(ctx, resultsFamily)
	if err != nil {
		return 0, err
	}
	moved := 0
	for subject := range results {
		if !c.neverQueued(rec, subject, ledger) {
			continue
		}
		raw, err := st.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // set aside meanwhile
		}
		if err != nil {
			return moved, fmt.Errorf("read %s: %w", subject, err)
		}
		if rec.Spec.Mode != schemas.Batch && !raw.Time.Add(ledgerSkew).Before(since) {
			continue // its item may be on its way to the ledger
		}
		if err := c.setAside(ctx, st, rec, raw); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}

// setAside stores raw's never_queued letter, then deletes raw.
func (c *Client) setAside(ctx context.Context, st jetstream.Stream, rec *schemas.JobRecord, raw *jetstream.RawStreamMsg) error {
	id := resultItem(raw.Subject)
	var why error
	switch {
	case rec.Spec.Mode != schemas.Batch:
		why = fmt.Errorf("streaming job %s was never queued item %q", rec.ID, id)
	case rec.Total == 0:
		why = fmt.Errorf("batch job %s has no item %q: its workload is empty", rec.ID, id)
	default:
		why = fmt.Errorf("batch job %s has no item %q: its workload is items %s to %s", rec.ID, id,
			schemas.WorkloadItemID(1), schemas.WorkloadItemID(rec.Total))
	}
	d := MalformedLetter(rec.ID, raw.Subject, raw.Data, raw.Header, why, c.clk.Now())
	d.Reason, d.Sequence = schemas.NeverQueued, raw.Sequence
	if schemas.ValidToken(id) {
		d.ItemID = id
	}
	key := fmt.Sprintf("never-queued/%s/%d", st.CachedInfo().Config.Name, raw.Sequence)
	if _, err := c.publishLetter(MessageContext(ctx, raw.Header), c.prefix.Dead(rec.ID), d, key); err != nil {
		return fmt.Errorf("set aside %s: %w", raw.Subject, err)
	}
	if err := st.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("remove never-queued result %s: %w", raw.Subject, err)
	}
	return nil
}
