package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// malformedCases are messages to job's queue that no worker can read:
// bustest's cases plus items of another job or with an invalid id.
func malformedCases(t *testing.T, c *bus.Client, job string) map[string]*nats.Msg {
	item := func(id, job string) *nats.Msg {
		m, err := bus.NewMsg(context.Background(), c.Prefix().Work(job), &schemas.WorkItem{ID: id, Job: job, Payload: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := bustest.Malformed(c.Prefix().Work(job), item("x", job))
	for name, data := range map[string][]byte{
		"another-job":     item("o1", "other-job").Data,
		"invalid-item-id": []byte(`{"id": "a.b", "job": "` + job + `", "payload": "p"}`),
	} {
		m := nats.NewMsg(c.Prefix().Work(job))
		m.Data = data
		m.Header.Set(bustest.CaseHeader, name)
		cases[name] = m
	}
	for name, m := range cases {
		m.Header.Set(schemas.HeaderMsgID, "case-"+name)
	}
	return cases
}

// TestMalformedItemsAreKeptByteForByteAndRedriven publishes unreadable
// messages to a job's queue on a real server: the worker dead-letters each
// (counted, and goes on with the good item), every dead letter read back
// from the stream keeps the message's exact bytes, headers and subject, and
// Redrive publishes it again exactly as it was.
func TestMalformedItemsAreKeptByteForByteAndRedriven(t *testing.T) {
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "raw"
	declare(t, ctx, c, job, time.Second, 3)
	cases := malformedCases(t, c, job)
	for _, m := range cases {
		if _, err := c.JetStream().PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	good := bus.Items("good")
	if err := c.PushItems(ctx, job, good); err != nil {
		t.Fatal(err)
	}
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil })
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	dead := readDead(t, ctx, c, job, len(cases))
	bustest.CheckKept(t, cases, dead)
	if got := w.Stats().Malformed; got != int64(len(cases)) {
		t.Errorf("worker counted %d malformed items, want %d", got, len(cases))
	}
	if got := readResults(t, ctx, c, job); len(got) != 1 || got[0].ItemID != good[0].ID {
		t.Errorf("results = %+v, want the good item's only", got)
	}

	// The inspection path (the manager's GET /submissions/{id}/errors) reads the same.
	stored, err := c.StoredDeadLetters(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	bustest.CheckKept(t, cases, stored)

	// Redrive: each message goes back to its subject as it was, minus its
	// Nats-Msg-Id (else JetStream would drop it as a duplicate), and is
	// dead-lettered again, unchanged.
	for _, d := range stored {
		if err := c.Redrive(ctx, d); err != nil {
			t.Fatalf("redrive %s: %v", d.Header[bustest.CaseHeader], err)
		}
	}
	again := readDead(t, ctx, c, job, 2*len(cases))[len(cases):]
	for _, m := range cases {
		m.Header.Del(schemas.HeaderMsgID)
	}
	bustest.CheckKept(t, cases, again)
}

func TestRedriveAnItemThatUsedUpItsDeliveries(t *testing.T) {
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "retry"
	declare(t, ctx, c, job, time.Second, 2)
	dlCtx, stopDL := context.WithCancel(ctx)
	dlDone := make(chan error, 1)
	go func() { dlDone <- c.DeadLetters(dlCtx) }()
	t.Cleanup(func() { stopDL(); <-dlDone })

	items := bus.Items("flaky")
	if err := c.PushItems(bus.WithCorrelationID(ctx, "corr-1"), job, items); err != nil {
		t.Fatal(err)
	}
	fixed := make(chan struct{})
	w, _ := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		select {
		case <-fixed:
			return "ok " + it.Payload, nil
		default:
			return "", errors.New("not yet")
		}
	}, bus.WithRetryDelay(20*time.Millisecond, 50*time.Millisecond))
	runWorker(t, w)

	d := readDead(t, ctx, c, job, 1)[0]
	if d.Reason != schemas.MaxDeliveries || d.ItemID != items[0].ID || d.Payload != "flaky" || d.Raw != nil ||
		d.Subject != c.Prefix().Work(job) || nats.Header(d.Header).Get(schemas.HeaderCorrelationID) != "corr-1" {
		t.Fatalf("dead letter = %+v, want item %s, its payload, subject and headers", d, items[0].ID)
	}
	close(fixed)
	if err := c.Redrive(ctx, d); err != nil {
		t.Fatal(err)
	}
	res := readResults(t, ctx, c, job)
	if len(res) != 1 || res[0].ItemID != items[0].ID || res[0].Output != "ok flaky" {
		t.Fatalf("results = %+v, want the redriven item's", res)
	}
	if err := c.Redrive(ctx, &schemas.DeadLetter{Job: job, Reason: schemas.Malformed, At: time.Now()}); !errors.Is(err, bus.ErrMalformed) {
		t.Errorf("redrive of a letter without its message: err = %v, want ErrMalformed", err)
	}
}

// TestMalformedItemTooLargeToKeepStaysOnTheQueue publishes an unreadable
// item whose dead letter cannot fit the server's max_payload: it is not
// lost (it stays on the work stream for an operator), the mover does not
// retry it forever, and the worker goes on with the next item.
func TestMalformedItemTooLargeToKeepStaysOnTheQueue(t *testing.T) {
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "huge"
	declare(t, ctx, c, job, time.Second, 2)
	dlCtx, stopDL := context.WithCancel(ctx)
	dlDone := make(chan error, 1)
	go func() { dlDone <- c.DeadLetters(dlCtx) }()
	t.Cleanup(func() { stopDL(); <-dlDone })

	huge := nats.NewMsg(c.Prefix().Work(job))
	huge.Data = make([]byte, 900<<10) // fits 1 MiB; its dead letter, in base64, does not
	if _, err := c.JetStream().PublishMsg(ctx, huge); err != nil {
		t.Fatal(err)
	}
	good := bus.Items("good")
	if err := c.PushItems(ctx, job, good); err != nil {
		t.Fatal(err)
	}
	w, _ := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil },
		bus.WithRetryDelay(20*time.Millisecond, 50*time.Millisecond))
	runWorker(t, w)

	if got := readResults(t, ctx, c, job); len(got) != 1 || got[0].ItemID != good[0].ID {
		t.Errorf("results = %+v, want the good item's", got)
	}
	adv, err := c.JetStream().Consumer(ctx, "PACE_ADVISORIES", "dead-letter")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 15*time.Second, "the max-deliveries advisory handled", func() bool {
		info, err := adv.Info(ctx)
		return err == nil && info.Delivered.Consumer > 0 && info.NumAckPending == 0 && info.NumPending == 0
	})
	st, err := c.JetStream().Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("work stream holds %d messages, want the huge item still there", info.State.Msgs)
	}
	if dead, err := c.StoredDeadLetters(ctx, job); err != nil || len(dead) != 0 {
		t.Errorf("dead letters = %d (%v), want none: it cannot fit", len(dead), err)
	}
	if w.Stats().Malformed == 0 {
		t.Error("the worker did not count the malformed item")
	}
}
