package bus_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestUndecodableJobEventIsDeadLetteredOnce stores an unreadable job event
// between two good ones on a real server. Several readers of one process
// read it at once, and another process reads it after the bus' duplicate
// window has passed: every reader goes on with the good events, and the
// event has exactly one dead letter, with its exact bytes, counted once.
func TestUndecodableJobEventIsDeadLetteredOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	const job = "garbled"
	at := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	if _, err := c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventStarted, At: at,
		State: schemas.Ongoing, Total: 1}); err != nil {
		t.Fatal(err)
	}
	garbage := nats.NewMsg(c.Prefix().Jobs(job, schemas.EventScaled))
	garbage.Data = []byte{0xff, 0xfe, '{', 0x00, 0xc3, '"', '\\'}
	garbage.Header.Set("Pace-Test", "garbled")
	ack, err := c.JetStream().PublishMsg(ctx, garbage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventCompleted, At: at,
		State: schemas.Completed}); err != nil {
		t.Fatal(err)
	}

	// read reads job's events with cl, as Events for job alone, for every
	// job, or Watch, and checks that it got both good ones.
	read := func(cl *bus.Client, how int) {
		t.Helper()
		var types []schemas.JobEventType
		switch how {
		case 0, 1:
			filter := job
			if how == 1 {
				filter = ""
			}
			for ev, err := range cl.Jobs().Events(ctx, filter, false) {
				if err != nil {
					t.Error(err)
					return
				}
				types = append(types, ev.Type)
			}
		default:
			for ev, err := range cl.Jobs().Watch(ctx, job) {
				if err != nil {
					t.Error(err)
					return
				}
				types = append(types, ev.Type)
			}
		}
		if want := []schemas.JobEventType{schemas.EventStarted, schemas.EventCompleted}; !slices.Equal(types, want) {
			t.Errorf("reader %d read %v, want %v", how, types, want)
		}
	}
	var wg sync.WaitGroup
	for how := range 3 {
		wg.Go(func() { read(c, how) })
	}
	wg.Wait()
	read(c, 0) // again, as a watch opened later would

	// Another process reads the event after the bus has forgotten the
	// letter's Nats-Msg-Id: it finds the letter kept.
	metrics, err := c.JetStream().Stream(ctx, c.Prefix().Stream(schemas.StreamMetrics))
	if err != nil {
		t.Fatal(err)
	}
	cfg := metrics.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond
	if _, err := c.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the duplicate window
	other := bustest.Client(t, s)
	read(other, 1)

	letters, err := c.Letters().StoredMalformed(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 {
		t.Fatalf("%d dead letters of the garbled event, want 1: %+v", len(letters), letters)
	}
	l := letters[0]
	if !bytes.Equal(l.Raw, garbage.Data) || l.Subject != garbage.Subject || l.Sequence != ack.Sequence ||
		l.Reason != schemas.Malformed || l.Job != job || l.Header["Pace-Test"][0] != "garbled" {
		t.Errorf("dead letter %+v does not keep the event %q on %s (sequence %d) as it was",
			l, garbage.Data, garbage.Subject, ack.Sequence)
	}
	if n := counted(t, c); n != 1 {
		t.Errorf("the first process counted %v malformed job events, want 1", n)
	}
	if n := counted(t, other); n != 0 {
		t.Errorf("the second process counted %v malformed job events, want 0: the letter was already kept", n)
	}
}

// TestJobEventNotSetAsideIsKeptLater stores an unreadable job event while
// its letter cannot be stored (PACE_METRICS is gone): the reader goes on
// with the good event, keeps no letter and counts nothing, and within the
// next minute does not try again; once the stream is back, another
// process's read keeps the event's one letter.
func TestJobEventNotSetAsideIsKeptLater(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := bustest.Server(t)
	c := bustest.Client(t, s)
	const job = "later"
	garbage := nats.NewMsg(c.Prefix().Jobs(job, schemas.EventScaled))
	garbage.Data = []byte("{not json")
	if _, err := c.JetStream().PublishMsg(ctx, garbage); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: job, Type: schemas.EventCompleted,
		At: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC), State: schemas.Completed}); err != nil {
		t.Fatal(err)
	}
	if err := c.JetStream().DeleteStream(ctx, c.Prefix().Stream(schemas.StreamMetrics)); err != nil {
		t.Fatal(err)
	}
	read := func(cl *bus.Client) {
		t.Helper()
		n := 0
		for _, err := range cl.Jobs().Events(ctx, job, false) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("read %d job events, want the good one", n)
		}
	}
	read(c)
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	read(c) // within the minute: not tried again
	if letters, err := c.Letters().StoredMalformed(ctx, job); err != nil || len(letters) != 0 {
		t.Fatalf("%d letters (%v) before another try, want 0", len(letters), err)
	}
	other := bustest.Client(t, s)
	read(other)
	letters, err := c.Letters().StoredMalformed(ctx, job)
	if err != nil || len(letters) != 1 || !bytes.Equal(letters[0].Raw, garbage.Data) {
		t.Fatalf("letters %+v (%v), want one keeping %q", letters, err, garbage.Data)
	}
	if n, m := counted(t, c), counted(t, other); n != 0 || m != 1 {
		t.Errorf("counted %v and %v, want 0 by the process that failed and 1 by the other", n, m)
	}
}

// counted is the value of c's pace_monitor_job_events_malformed_total,
// gathered as a scrape would.
func counted(t *testing.T, c *bus.Client) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Jobs().MalformedEvents())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "pace_monitor_job_events_malformed_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("pace_monitor_job_events_malformed_total not gathered")
	return 0
}

// TestLargeUndecodableJobEventIsKeptInTheObjectStore stores an unreadable
// job event too large for its dead letter to carry: readers go on with the
// good events, its body is kept once in the dead-letter object store,
// which the letter names, it is counted once, and Redrive publishes it
// again byte for byte, removing the letter and the object.
func TestLargeUndecodableJobEventIsKeptInTheObjectStore(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "bulky"
	at := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	good := &schemas.JobEvent{Job: job, Type: schemas.EventStarted, At: at, State: schemas.Ongoing, Total: 1}
	if _, err := c.Jobs().PublishEvent(ctx, good); err != nil {
		t.Fatal(err)
	}
	garbage := nats.NewMsg(c.Prefix().Jobs(job, schemas.EventScaled))
	garbage.Data = hugeBody(t)
	ack, err := c.JetStream().PublishMsg(ctx, garbage)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			n := 0
			for _, err := range c.Jobs().Events(ctx, job, false) {
				if err != nil {
					t.Error(err)
					return
				}
				n++
			}
			if n != 1 {
				t.Errorf("a reader read %d events, want the good one", n)
			}
		})
	}
	wg.Wait()

	letters, err := c.Letters().StoredMalformed(ctx, job)
	if err != nil || len(letters) != 1 {
		t.Fatalf("%d dead letters (%v), want 1", len(letters), err)
	}
	d := letters[0]
	if d.Raw != nil || d.RawObject == "" || d.RawSize != int64(len(garbage.Data)) || d.Sequence != ack.Sequence ||
		d.Subject != garbage.Subject {
		t.Fatalf("dead letter %+v, want one naming an object of %d bytes", d, len(garbage.Data))
	}
	if body, err := c.Letters().Body(ctx, d); err != nil || !bytes.Equal(body, garbage.Data) {
		t.Errorf("letter body: %d bytes (%v), want the event's %d exactly", len(body), err, len(garbage.Data))
	}
	if got := objectNames(t, ctx, c); len(got) != 1 {
		t.Errorf("objects = %q, want one", got)
	}
	if n := counted(t, c); n != 1 {
		t.Errorf("counted %v malformed job events, want 1", n)
	}

	var l *bus.StoredLetter
	for sl, err := range c.Letters().List(ctx, bus.DeadMessages, job, false) {
		if err != nil {
			t.Fatal(err)
		}
		l = sl
	}
	if err := c.Letters().Redrive(ctx, l); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.JetStream().Stream(ctx, "PACE_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	again, err := jobs.GetLastMsgForSubject(ctx, garbage.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if again.Sequence == ack.Sequence || !bytes.Equal(again.Data, garbage.Data) {
		t.Errorf("redriven event: sequence %d, %d bytes; want a new one, byte for byte", again.Sequence, len(again.Data))
	}
	if got := objectNames(t, ctx, c); len(got) != 0 {
		t.Errorf("objects after the redrive = %q, want none", got)
	}
	if _, err := c.Letters().Get(ctx, bus.DeadMessages, l.Seq); !errors.Is(err, bus.ErrLetterNotFound) {
		t.Errorf("letter after the redrive: err = %v, want ErrLetterNotFound", err)
	}
}
