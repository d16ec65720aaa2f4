package bus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	t.Parallel()
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
	stored, err := c.Letters().Stored(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	bustest.CheckKept(t, cases, stored)

	// Redrive: each message goes back to its subject as it was, its
	// Nats-Msg-Id naming the letter (the dead message's would make
	// JetStream drop it as a duplicate), its letter is removed, and it is
	// dead-lettered again, unchanged. A letter redriven twice is sent once.
	var letters []*bus.StoredLetter
	for l, err := range c.Letters().List(ctx, bus.DeadItems, job, false) {
		if err != nil {
			t.Fatal(err)
		}
		letters = append(letters, l)
	}
	for _, l := range letters {
		if err := c.Letters().Redrive(ctx, l); err != nil {
			t.Fatalf("redrive %s: %v", l.Header[bustest.CaseHeader], err)
		}
		if err := c.Letters().Redrive(ctx, l); !errors.Is(err, bus.ErrLetterNotFound) {
			t.Errorf("second redrive of %s: err = %v, want ErrLetterNotFound", l.Header[bustest.CaseHeader], err)
		}
	}
	again := readDead(t, ctx, c, job, len(cases))
	for _, d := range again {
		if id := nats.Header(d.Header).Get(schemas.HeaderMsgID); !strings.HasPrefix(id, "pace-redrive/PACE_DEAD/") {
			t.Errorf("redriven %s has Nats-Msg-Id %q, want the letter's", d.Header[bustest.CaseHeader], id)
		}
		nats.Header(d.Header).Del(schemas.HeaderMsgID)
	}
	for _, m := range cases {
		m.Header.Del(schemas.HeaderMsgID)
	}
	bustest.CheckKept(t, cases, again)
	if n := letterCount(t, ctx, c, job); n != len(cases) {
		t.Errorf("%d letters after the redrive, want %d: each redriven once, its old letter removed", n, len(cases))
	}
}

// letterCount is the number of job's letters in PACE_DEAD.
func letterCount(t *testing.T, ctx context.Context, c *bus.Client, job string) int {
	t.Helper()
	n := 0
	for _, err := range c.Letters().List(ctx, bus.DeadItems, job, false) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func TestRedriveAnItemThatUsedUpItsDeliveries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "retry"
	declare(t, ctx, c, job, time.Second, 2)
	dlCtx, stopDL := context.WithCancel(ctx)
	dlDone := make(chan error, 1)
	go func() { dlDone <- c.Letters().Move(dlCtx) }()
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
	l, err := c.Letters().Get(ctx, bus.DeadItems, 1)
	if err != nil || l.ItemID != d.ItemID {
		t.Fatalf("letter 1 = %+v (%v), want item %s's", l, err, d.ItemID)
	}
	if err := c.Letters().Redrive(ctx, l); err != nil {
		t.Fatal(err)
	}
	res := readResults(t, ctx, c, job)
	if len(res) != 1 || res[0].ItemID != items[0].ID || res[0].Output != "ok flaky" {
		t.Fatalf("results = %+v, want the redriven item's", res)
	}
	if n := letterCount(t, ctx, c, job); n != 0 {
		t.Errorf("%d letters after the redrive, want none", n)
	}
	bustest.KeepLedger(t, c)
	rec, err := c.Jobs().Status(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "1 result and 0 dead", func() bool {
		ws, err := c.JobWork(ctx, rec)
		return err == nil && ws.Results == 1 && ws.Dead == 0
	})

	// A letter left beside its item's result (a redrive interrupted
	// before it removed the letter, or a late success) does not count, and
	// redriving it sends nothing and removes it.
	stale := &schemas.DeadLetter{Job: job, ItemID: items[0].ID, Reason: schemas.MaxDeliveries, Payload: "flaky", At: time.Now()}
	if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), stale, ""); err != nil {
		t.Fatal(err)
	}
	if ws, err := c.JobWork(ctx, rec); err != nil || ws.Dead != 0 {
		t.Errorf("work state with a stale letter = %+v (%v), want 0 dead", ws, err)
	}
	l, err = c.Letters().Get(ctx, bus.DeadItems, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Letters().Redrive(ctx, l); !errors.Is(err, bus.ErrHasResult) {
		t.Errorf("redrive of a stale letter: err = %v, want ErrHasResult", err)
	}
	if n := letterCount(t, ctx, c, job); n != 0 {
		t.Errorf("%d letters after redriving a stale one, want none", n)
	}
	if res := readResults(t, ctx, c, job); len(res) != 1 {
		t.Errorf("%d results, want 1", len(res))
	}

	empty := &schemas.DeadLetter{Job: job, Reason: schemas.Malformed, At: time.Now()}
	if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), empty, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Letters().Redrive(ctx, &bus.StoredLetter{Store: bus.DeadItems, Seq: 3}); !errors.Is(err, bus.ErrMalformed) {
		t.Errorf("redrive of a letter without its message: err = %v, want ErrMalformed", err)
	}
}

// TestLettersAndLetter reads letters of two jobs from both stores, as the
// CLI does: by job, for every job, one by sequence, and as they come.
func TestLettersAndLetter(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	publish := func(subject string, d *schemas.DeadLetter) {
		t.Helper()
		if err := c.Letters().Publish(ctx, subject, d, ""); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now()
	publish(c.Prefix().Dead("a"), &schemas.DeadLetter{Job: "a", ItemID: "i1", Reason: schemas.MaxDeliveries, Payload: "p", At: at})
	publish(c.Prefix().Dead("b"), &schemas.DeadLetter{Job: "b", ItemID: "i2", Reason: schemas.MaxDeliveries, Payload: "q", At: at})
	publish(c.Prefix().Metrics("a", schemas.DeadMetrics), bus.MalformedLetter("a", "pace.metrics.a.raw", []byte{0xff}, nil, errors.New("not UTF-8"), at))
	// Not a dead letter: skipped by Letters, not found by Letter.
	if _, err := c.JetStream().Publish(ctx, c.Prefix().Dead("a"), []byte("junk")); err != nil {
		t.Fatal(err)
	}

	list := func(store bus.LetterStore, job string) (out []string) {
		t.Helper()
		for l, err := range c.Letters().List(ctx, store, job, false) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s:%d:%s:%s", l.Store, l.Seq, l.Job, l.ItemID))
		}
		return out
	}
	if got, want := list(bus.DeadItems, "a"), []string{"dead:1:a:i1"}; !slices.Equal(got, want) {
		t.Errorf("letters of a = %v, want %v", got, want)
	}
	if got, want := list(bus.DeadItems, "*"), []string{"dead:1:a:i1", "dead:2:b:i2"}; !slices.Equal(got, want) {
		t.Errorf("letters of every job = %v, want %v", got, want)
	}
	if got := list(bus.DeadMessages, "a"); len(got) != 1 || !strings.HasPrefix(got[0], "metrics:") {
		t.Errorf("set-aside letters of a = %v, want one", got)
	}
	for _, err := range c.Letters().List(ctx, "bogus", "a", false) {
		if !errors.Is(err, bus.ErrInvalidOption) {
			t.Errorf("letters of store bogus: err = %v, want ErrInvalidOption", err)
		}
	}

	l, err := c.Letters().Get(ctx, bus.DeadItems, 2)
	if err != nil || l.Job != "b" || l.ItemID != "i2" || l.Payload != "q" || l.Seq != 2 || l.Store != bus.DeadItems {
		t.Errorf("letter 2 = %+v (%v), want b's item i2", l, err)
	}
	if _, err := c.Letters().Get(ctx, bus.DeadItems, 99); !errors.Is(err, bus.ErrLetterNotFound) {
		t.Errorf("letter 99: err = %v, want ErrLetterNotFound", err)
	}
	if l, err := c.Letters().Get(ctx, bus.DeadMessages, 1); err != nil || l.Job != "a" || !bytes.Equal(l.Raw, []byte{0xff}) {
		t.Errorf("letter metrics:1 = %+v (%v), want a's set-aside sample", l, err)
	}
	if _, err := c.Letters().Get(ctx, bus.DeadItems, 3); !errors.Is(err, bus.ErrMalformed) {
		t.Errorf("letter 3 (junk): err = %v, want ErrMalformed", err)
	}
	if _, err := c.Letters().Get(ctx, "bogus", 1); !errors.Is(err, bus.ErrInvalidOption) {
		t.Errorf("letter of store bogus: err = %v, want ErrInvalidOption", err)
	}

	// follow: a letter stored later is yielded too.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got, done := make(chan string, 4), make(chan struct{})
	go func() {
		defer close(done)
		for l, err := range c.Letters().List(fctx, bus.DeadItems, "b", true) {
			if err != nil {
				return
			}
			got <- l.ItemID
		}
	}()
	defer func() { cancel(); <-done }()
	if id := <-got; id != "i2" {
		t.Fatalf("followed letter = %s, want i2", id)
	}
	publish(c.Prefix().Dead("b"), &schemas.DeadLetter{Job: "b", ItemID: "i3", Reason: schemas.MaxDeliveries, Payload: "r", At: at})
	if id := <-got; id != "i3" {
		t.Errorf("followed letter = %s, want i3", id)
	}
}

// TestTwoStagesSetAsideAMessageOnce has two stages (the controller and a
// sink both read progress) set aside the same unreadable message: it gets
// one letter, so that a redrive sends it back once.
func TestTwoStagesSetAsideAMessageOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "shared"
	subject := c.Prefix().Metrics(job, schemas.ProgressMetrics)
	if _, err := c.JetStream().Publish(ctx, subject, []byte("not progress")); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"controller", "sink"} {
		cons, err := c.JetStream().CreateConsumer(ctx, "PACE_METRICS", jetstream.ConsumerConfig{Durable: stage,
			FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		c.SetAside(ctx, stage, msg, errors.New("unreadable progress"))
	}
	if dead, err := c.Letters().StoredMalformed(ctx, job); err != nil || len(dead) != 1 {
		t.Errorf("letters = %d (%v), want 1: one message, however many stages set it aside", len(dead), err)
	}
}

// TestForgedLettersAreNotRedrivenElsewhere: a job's workers, and so its
// owner, may write letters on pace.dead.<job>. A letter is not a way to have
// whoever redrives it (an admin, an operator with a stage's credentials)
// publish to another subject or another job's.
func TestForgedLettersAreNotRedrivenElsewhere(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	at := time.Now()
	request := []byte(`{"verb":"create","kind":"Job"}`)
	for name, tc := range map[string]struct {
		store   bus.LetterStore
		subject string // where the letter is kept
		letter  *schemas.DeadLetter
	}{
		"an infrastructure request": {bus.DeadItems, c.Prefix().Dead("j1"),
			bus.MalformedLetter("j1", c.Prefix().KubeRequests(), request, nil, errors.New("forged"), at)},
		"another job's event": {bus.DeadItems, c.Prefix().Dead("j1"),
			bus.MalformedLetter("j1", c.Prefix().Jobs("j2", schemas.EventTerminated), request, nil, errors.New("forged"), at)},
		"another job's letter": {bus.DeadItems, c.Prefix().Dead("j1"),
			bus.MalformedLetter("j2", c.Prefix().Work("j2"), request, nil, errors.New("forged"), at)},
		"a message of another job": {bus.DeadMessages, c.Prefix().Metrics("j1", schemas.DeadMetrics),
			bus.MalformedLetter("j1", c.Prefix().Metrics("j2", schemas.RawMetrics), request, nil, errors.New("x"), at)},
	} {
		t.Run(name, func(t *testing.T) {
			if err := c.Letters().Publish(ctx, tc.subject, tc.letter, ""); err != nil {
				t.Fatal(err)
			}
			var seq uint64
			for l, err := range c.Letters().List(ctx, tc.store, "*", false) {
				if err != nil {
					t.Fatal(err)
				}
				seq = l.Seq
			}
			err := c.Letters().Redrive(ctx, &bus.StoredLetter{Store: tc.store, Seq: seq})
			if !errors.Is(err, bus.ErrMalformed) {
				t.Errorf("redrive = %v, want ErrMalformed", err)
			}
		})
	}
	for _, family := range []schemas.Stream{schemas.StreamKube, schemas.StreamJobs, schemas.StreamWork} {
		info, err := c.JetStream().Stream(ctx, c.Prefix().Stream(family))
		if err != nil {
			t.Fatal(err)
		}
		if n := info.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("%s holds %d messages after the redrives, want none", family, n)
		}
	}
}

// TestLetterIDsRoundTrip: a letter's ID reads back as its store and
// sequence; IDs naming no store, or no positive sequence, are refused.
func TestLetterIDsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, l := range []*bus.StoredLetter{{Store: bus.DeadItems, Seq: 12}, {Store: bus.DeadMessages, Seq: 40}} {
		store, seq, err := bus.ParseLetterID(l.ID())
		if err != nil || store != l.Store || seq != l.Seq {
			t.Errorf("ParseLetterID(%q) = %s, %d, %v; want %s, %d", l.ID(), store, seq, err, l.Store, l.Seq)
		}
	}
	if got := (&bus.StoredLetter{Store: bus.DeadItems, Seq: 12}).ID(); got != "12" {
		t.Errorf("ID of dead item 12 = %q, want 12", got)
	}
	if store, seq, err := bus.ParseLetterID("dead:12"); err != nil || store != bus.DeadItems || seq != 12 {
		t.Errorf("ParseLetterID(dead:12) = %s, %d, %v; want dead, 12", store, seq, err)
	}
	for _, id := range []string{"", "0", "-1", "x", "bogus:1", "metrics:", "metrics:0", "12:metrics"} {
		if _, _, err := bus.ParseLetterID(id); !errors.Is(err, bus.ErrInvalidOption) {
			t.Errorf("ParseLetterID(%q): err = %v, want ErrInvalidOption", id, err)
		}
	}
}
