package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// Results a batch job never queued. A batch job's work is its workload,
// queued by the manager as items schemas.WorkloadItemID(1..Total), so a
// result for any other id on pace.results.<job>.* is for an item the job
// never had: the server stores it (whoever may publish the job's results
// may publish any id), but it must count for nothing. JobWork leaves it out
// of Results and counts it in NeverQueued, and SetAsideNeverQueued moves
// it to the job's dead letters.

// neverQueued reports whether the result subject of rec's job names an
// item rec's workload does not have. Only a batch job's items are known.
func (c *Client) neverQueued(rec *schemas.JobRecord, subject string) bool {
	if rec.Spec.Mode != schemas.Batch {
		return false
	}
	return !schemas.InWorkload(resultItem(subject), rec.Total)
}

// resultItem returns the item id a pace.results.<job>.<item> subject names.
func resultItem(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// SetAsideNeverQueued moves the results of batch job rec that are for no
// item of its workload to the job's dead letters, reason never_queued,
// each kept byte for byte with its headers, and deletes them from the
// results stream; it returns how many it moved. As RefuseWork does, it
// stores the letter first, with a Nats-Msg-Id naming the result's stream
// sequence, then deletes the result: an interrupted call loses nothing and
// stores one letter when it runs again. A job that is not a batch job has
// none.
func (c *Client) SetAsideNeverQueued(ctx context.Context, rec *schemas.JobRecord) (int, error) {
	if rec.Spec.Mode != schemas.Batch {
		return 0, nil
	}
	results, err := c.subjectCounts(ctx, resultsFamily, c.prefix.JobResults(rec.ID))
	if err != nil {
		return 0, err
	}
	name := c.prefix.Stream(resultsFamily)
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	moved := 0
	for subject := range results {
		if !c.neverQueued(rec, subject) {
			continue
		}
		raw, err := st.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // set aside meanwhile
		}
		if err != nil {
			return moved, fmt.Errorf("read %s: %w", subject, err)
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
	why := fmt.Errorf("batch job %s has no item %q: its workload is items %s to %s", rec.ID, id,
		schemas.WorkloadItemID(1), schemas.WorkloadItemID(rec.Total))
	if rec.Total == 0 {
		why = fmt.Errorf("batch job %s has no item %q: its workload is empty", rec.ID, id)
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
