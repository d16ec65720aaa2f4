package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// RefuseWork stores each letter before it deletes the item, keyed by the
// item's sequence: a retry after a crash between the two stores no second
// letter. Only items up to the given sequence move; a body too large for
// its letter goes to the object store; letters are labeled version 4.
func TestRefuseWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	js := c.JetStream()
	const subject = "pace.work.gone"
	var seqs []uint64
	for _, body := range [][]byte{[]byte(`{"id":"a","job":"gone","payload":"first"}`), hugeBody(t), []byte("later")} {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: body})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	// A refusal that stored the first letter and crashed before deleting.
	crashed := bus.RefusedLetter("gone", subject, []byte(`{"id":"a","job":"gone","payload":"first"}`), nil, "no such job",
		time.Now())
	crashed.Sequence = seqs[0]
	if err := c.Letters().Publish(ctx, "pace.dead.gone", crashed, fmt.Sprintf("refused/PACE_WORK/%d", seqs[0])); err != nil {
		t.Fatal(err)
	}

	n, err := c.Queues().RefuseWork(ctx, "PACE_WORK", subject, seqs[1], "no such job")
	if err != nil || n != 2 {
		t.Fatalf("RefuseWork = %d, %v; want 2 moved", n, err)
	}
	q, err := c.Queues().QueuedWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Subjects[subject] != 1 || q.LastSeq[subject] != seqs[2] {
		t.Errorf("queued = %v (last %d), want the item past the bound left (last %d)", q.Subjects, q.LastSeq[subject], seqs[2])
	}
	var letters []*bus.StoredLetter
	for l, err := range c.Letters().List(ctx, bus.DeadItems, "gone", false) {
		if err != nil {
			t.Fatal(err)
		}
		letters = append(letters, l)
	}
	if len(letters) != 2 {
		t.Fatalf("%d letters, want 2 (one per item)", len(letters))
	}
	if l := letters[0]; l.ItemID != "a" || l.Payload != "first" || l.Sequence != seqs[0] || l.Reason != schemas.RefusedItem {
		t.Errorf("first letter %+v, want item a, its payload and sequence", l.DeadLetter)
	}
	if l := letters[1]; l.RawObject == "" || l.RawSize != int64(len(hugeBody(t))) || l.Payload != "" {
		t.Errorf("second letter %+v, want its body in the object store", l.DeadLetter)
	}
	if body, err := c.Letters().Body(ctx, letters[1].DeadLetter); err != nil || !bytes.Equal(body, hugeBody(t)) {
		t.Errorf("second letter's body: %d bytes (%v), want the item byte for byte", len(body), err)
	}
	st, err := js.Stream(ctx, "PACE_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(ctx, letters[1].Seq)
	if err != nil || m.Header.Get(schemas.HeaderSchemaVersion) != "4" {
		t.Errorf("refused letter version %q (%v), want 4", m.Header.Get(schemas.HeaderSchemaVersion), err)
	}
}

// An item whose result was stored after it is one processed whose
// acknowledgement was lost, or that the ledger has yet to take in:
// RefuseWork enters it in the ledger and deletes it without a letter. An
// item queued after its id's result reuses the id: it is refused with a
// letter naming the result, as are the other items.
func TestRefuseWorkDeletesProcessedItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	const subject = "pace.work.done"
	queue := func(id, payload string) {
		body := fmt.Sprintf(`{"id":%q,"job":"done","payload":%q}`, id, payload)
		if _, err := c.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	queue("a", "p")
	queue("b", "p")
	if err := c.PublishResult(ctx, &schemas.Result{ItemID: "a", Job: "done", Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	queue("a", "again")

	n, err := c.Queues().RefuseWork(ctx, "PACE_WORK", subject, ^uint64(0), "job completed")
	if err != nil || n != 2 {
		t.Fatalf("RefuseWork = %d, %v; want 2 moved (b, a again), the processed a deleted", n, err)
	}
	if q, err := c.Queues().QueuedWork(ctx); err != nil || q.Subjects[subject] != 0 {
		t.Errorf("queued = %v (%v), want the subject emptied", q.Subjects, err)
	}
	letters := map[string]*bus.StoredLetter{}
	for l, err := range c.Letters().List(ctx, bus.DeadItems, "done", false) {
		if err != nil {
			t.Fatal(err)
		}
		letters[l.ItemID] = l
	}
	if len(letters) != 2 || letters["b"] == nil || letters["a"] == nil {
		t.Fatalf("letters for items %v, want b's and the second a's", letters)
	}
	if a := letters["a"]; a.Payload != "again" || a.Reason != schemas.RefusedItem ||
		!strings.Contains(a.LastError, "item a already has a result") {
		t.Errorf("letter of the reused id a: %+v, want refused, its payload, naming the result", a.DeadLetter)
	}
	if b := letters["b"]; b.LastError != "job completed" {
		t.Errorf("letter of b: last error %q, want the job's refusal", b.LastError)
	}
	st, err := c.JetStream().Stream(ctx, "PACE_LEDGER")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("pace.ledger.done.*"))
	if err != nil || len(info.State.Subjects) != 1 || info.State.Subjects["pace.ledger.done.a"] != 1 {
		t.Errorf("ledger of the job = %v (%v), want the processed item a's entry only", info.State.Subjects, err)
	}
}
