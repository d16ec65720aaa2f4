package bus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// lettersBucket is the dead-letter object store of the default prefix.
const lettersBucket = "pace_dead_letters"

// hugeBody is a message body too large for its dead letter: it fits the
// server's 1 MiB max_payload, its base64 does not. Its bytes are not UTF-8.
func hugeBody(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 900<<10)
	r := rand.New(rand.NewPCG(9, 0))
	for i := range b {
		b[i] = byte(r.UintN(256)) | 0x80
	}
	return b
}

// objectNames lists the dead-letter object store.
func objectNames(t *testing.T, ctx context.Context, c *bus.Client) []string {
	t.Helper()
	obs, err := c.JetStream().ObjectStore(ctx, lettersBucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(infos))
	for i, o := range infos {
		names[i] = o.Name
	}
	return names
}

// streamMsgs is the number of messages stream holds.
func streamMsgs(t *testing.T, ctx context.Context, c *bus.Client, stream string) uint64 {
	t.Helper()
	st, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestTermDeletesFromAWorkQueueStream is why a message is terminated only
// once its dead letter is stored. Before the dead-letter object store,
// SetAside terminated a message whose letter could not fit max_payload:
// on a limits stream the message stays, but on a work-queue stream the
// server removes a terminated message as an acknowledged one, and such a
// message was lost.
func TestTermDeletesFromAWorkQueueStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	for _, tt := range []struct {
		retention jetstream.RetentionPolicy
		want      uint64
	}{{jetstream.WorkQueuePolicy, 0}, {jetstream.LimitsPolicy, 1}} {
		t.Run(tt.retention.String(), func(t *testing.T) {
			name := "TERM_" + tt.retention.String()
			st, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
				Retention: tt.retention})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.JetStream().Publish(ctx, name+".x", hugeBody(t)); err != nil {
				t.Fatal(err)
			}
			cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
			if err != nil {
				t.Fatal(err)
			}
			msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := msg.TermWithReason("too large to dead-letter"); err != nil {
				t.Fatal(err)
			}
			bustest.Eventually(t, 10*time.Second, "the termination processed", func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.NumAckPending == 0
			})
			// The server removes a terminated message from a work-queue
			// stream after it updates the consumer: wait for the count.
			bustest.Eventually(t, 10*time.Second, fmt.Sprintf("%s stream to hold %d messages after Term", tt.retention, tt.want), func() bool {
				return streamMsgs(t, ctx, c, name) == tt.want
			})
		})
	}
}

// TestLargeMalformedItemIsKeptInTheObjectStore publishes an unreadable
// item whose dead letter cannot carry its body: the worker keeps the body
// in the dead-letter object store and the letter names it, the item leaves
// the work queue, and Redrive sends it back byte for byte, then removes
// the letter and the object.
func TestLargeMalformedItemIsKeptInTheObjectStore(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	bustest.KeepLedger(t, c)
	const job = "huge"
	// An item timeout longer than storing the body takes on a busy machine
	// (over a second beside the parallel tests): a delivery timed out while
	// its body is being kept would be set aside, and counted, twice.
	declare(t, ctx, c, job, 10*time.Second, 2)

	huge := nats.NewMsg(c.Prefix().Work(job))
	huge.Data = hugeBody(t)
	huge.Header.Set("Publisher-Note", "large")
	if _, err := c.JetStream().PublishMsg(ctx, huge); err != nil {
		t.Fatal(err)
	}
	good := bus.Items("good")
	if err := c.PushItems(ctx, job, good); err != nil {
		t.Fatal(err)
	}
	w, err := c.Worker(job, func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil })
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	d := readDead(t, ctx, c, job, 1)[0]
	bustest.Eventually(t, 20*time.Second, "the good item processed", func() bool { return w.Stats().Processed == 1 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}

	if got := w.Stats().Malformed; got != 1 {
		t.Errorf("worker counted %d malformed items, want 1", got)
	}
	if got := readResults(t, ctx, c, job); len(got) != 1 || got[0].ItemID != good[0].ID {
		t.Errorf("results = %+v, want the good item's", got)
	}
	if d.Reason != schemas.Malformed || d.Raw != nil || d.RawSize != int64(len(huge.Data)) || d.RawObject == "" ||
		d.Subject != huge.Subject || nats.Header(d.Header).Get("Publisher-Note") != "large" {
		t.Fatalf("dead letter = %+v, want a malformed letter naming a %d-byte object", d, len(huge.Data))
	}
	if got := objectNames(t, ctx, c); len(got) != 1 || got[0] != d.RawObject {
		t.Errorf("objects = %q, want the letter's %q", got, d.RawObject)
	}
	bustest.Eventually(t, 10*time.Second, "no message on the work stream: the item is dead-lettered", func() bool {
		return streamMsgs(t, ctx, c, "PACE_WORK") == 0
	})

	l, err := c.Letters().Get(ctx, bus.DeadItems, 1)
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Letters().Body(ctx, l.DeadLetter)
	if err != nil || !bytes.Equal(body, huge.Data) {
		t.Fatalf("letter body: %d bytes (%v), want the item's %d bytes exactly", len(body), err, len(huge.Data))
	}
	if err := c.Letters().Redrive(ctx, l); err != nil {
		t.Fatal(err)
	}
	st, err := c.JetStream().Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.GetLastMsgForSubject(ctx, huge.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Data, huge.Data) || again.Header.Get("Publisher-Note") != "large" {
		t.Errorf("redriven item: %d bytes, headers %v; want the item byte for byte", len(again.Data), again.Header)
	}
	if n := letterCount(t, ctx, c, job); n != 0 {
		t.Errorf("%d letters after the redrive, want none", n)
	}
	if got := objectNames(t, ctx, c); len(got) != 0 {
		t.Errorf("objects after the redrive = %q, want none", got)
	}
	if err := c.Letters().Redrive(ctx, l); !errors.Is(err, bus.ErrLetterNotFound) {
		t.Errorf("second redrive: err = %v, want ErrLetterNotFound", err)
	}
}

// TestSetAsideKeepsALargeBodyOnceAndRetries sets aside an unreadable
// sample too large for its letter, as the processor does: while the object
// store cannot be written the sample is asked for again, not terminated;
// then it is kept once (setting it aside again writes no second object),
// and purging the job deletes letter and object.
func TestSetAsideKeepsALargeBodyOnceAndRetries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "bulky"
	subject := c.Prefix().Metrics(job, schemas.RawMetrics)
	body := hugeBody(t)
	if _, err := c.JetStream().Publish(ctx, subject, body); err != nil {
		t.Fatal(err)
	}
	cons, err := c.JetStream().CreateConsumer(ctx, "PACE_METRICS", jetstream.ConsumerConfig{Durable: "reader",
		FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	next := func() jetstream.Msg {
		t.Helper()
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	cause := errors.New("not a sample")

	if err := c.JetStream().DeleteObjectStore(ctx, lettersBucket); err != nil {
		t.Fatal(err)
	}
	c.SetAside(ctx, "test", next(), cause)
	if dead, err := c.Letters().StoredMalformed(ctx, job); err != nil || len(dead) != 0 {
		t.Fatalf("letters without an object store = %d (%v), want none", len(dead), err)
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	msg := next() // asked for again: not terminated
	c.SetAside(ctx, "test", msg, cause)
	c.SetAside(ctx, "test", msg, cause) // a retry: the letter is a duplicate
	dead, err := c.Letters().StoredMalformed(ctx, job)
	if err != nil || len(dead) != 1 {
		t.Fatalf("letters = %d (%v), want 1", len(dead), err)
	}
	if got, err := c.Letters().Body(ctx, dead[0]); err != nil || !bytes.Equal(got, body) {
		t.Errorf("letter body: %d bytes (%v), want the sample's %d", len(got), err, len(body))
	}
	if got := objectNames(t, ctx, c); len(got) != 1 || got[0] != dead[0].RawObject {
		t.Errorf("objects = %q, want only the letter's %q", got, dead[0].RawObject)
	}
	if _, err := cons.Next(jetstream.FetchMaxWait(1500 * time.Millisecond)); !errors.Is(err, jetstream.ErrNoMessages) &&
		!errors.Is(err, nats.ErrTimeout) {
		t.Errorf("after setting aside: next = %v, want no message (terminated)", err)
	}

	if err := c.Queues().PurgeJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if got := objectNames(t, ctx, c); len(got) != 0 {
		t.Errorf("objects after purging the job = %q, want none", got)
	}
}

// TestSweepLetterObjects leaves an object no letter names, as a crash
// between the object and its letter would: the sweep deletes it once it
// is old enough, and keeps the object a letter names.
func TestSweepLetterObjects(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "swept"
	d := bus.MalformedLetter(job, c.Prefix().Work(job), hugeBody(t), nil, errors.New("unreadable"), time.Now())
	if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), d, ""); err != nil {
		t.Fatal(err)
	}
	obs, err := c.JetStream().ObjectStore(ctx, lettersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, c.Prefix().Dead(job)+"/orphan", []byte("no letter")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Letters().Sweep(ctx, time.Hour); err != nil || n != 0 {
		t.Errorf("sweep with an hour's grace deleted %d (%v), want 0: both objects are new", n, err)
	}
	if n, err := c.Letters().Sweep(ctx, 0); err != nil || n != 1 {
		t.Errorf("sweep deleted %d (%v), want 1", n, err)
	}
	dead, err := c.Letters().Stored(ctx, job)
	if err != nil || len(dead) != 1 {
		t.Fatalf("letters = %d (%v), want 1", len(dead), err)
	}
	if got := objectNames(t, ctx, c); len(got) != 1 || got[0] != dead[0].RawObject {
		t.Errorf("objects after the sweep = %q, want the letter's %q", got, dead[0].RawObject)
	}

	// A letter this build cannot read (a newer version's) may name an
	// object, under its own subject: those are spared while it is stored,
	// and the objects of other letter subjects are swept.
	spared, swept := c.Prefix().Dead(job)+"/another", c.Prefix().Dead("other")+"/orphan"
	for _, name := range []string{spared, swept} {
		if _, err := obs.PutBytes(ctx, name, []byte("no letter")); err != nil {
			t.Fatal(err)
		}
	}
	newer := nats.NewMsg(c.Prefix().Dead(job))
	newer.Data = []byte(`{"job": "swept", "reason": "malformed", "raw_object_v9": "x"}`)
	newer.Header.Set(schemas.HeaderSchema, "dead_letter")
	newer.Header.Set(schemas.HeaderSchemaVersion, "9")
	if _, err := c.JetStream().PublishMsg(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Letters().Sweep(ctx, 0); !errors.Is(err, bus.ErrMalformed) || n != 1 {
		t.Errorf("sweep beside a newer letter deleted %d (%v), want 1 and ErrMalformed", n, err)
	}
	got, want := objectNames(t, ctx, c), []string{spared, dead[0].RawObject}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("objects after sweeping beside a newer letter = %q, want %q", got, want)
	}
}

// TestRetriedLetterRewritesItsObject fails a letter's write after its
// object's, twice, as a bus without PACE_DEAD would, then retries once
// the stream is back: the retries wrote the same object again, so exactly
// one is left, the one the letter names.
func TestRetriedLetterRewritesItsObject(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "retried"
	d := bus.MalformedLetter(job, c.Prefix().Work(job), hugeBody(t), nil, errors.New("unreadable"), time.Now())
	if err := c.JetStream().DeleteStream(ctx, "PACE_DEAD"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), d, job+"/seq/7"); err == nil {
			t.Fatal("letter published without its stream")
		}
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), d, job+"/seq/7"); err != nil {
		t.Fatal(err)
	}
	dead, err := c.Letters().Stored(ctx, job)
	if err != nil || len(dead) != 1 {
		t.Fatalf("letters = %d (%v), want 1", len(dead), err)
	}
	if got := objectNames(t, ctx, c); len(got) != 1 || got[0] != dead[0].RawObject {
		t.Errorf("objects = %q, want only the letter's %q", got, dead[0].RawObject)
	}
	if body, err := c.Letters().Body(ctx, dead[0]); err != nil || !bytes.Equal(body, d.Raw) {
		t.Errorf("letter body: %d bytes (%v), want the message's %d", len(body), err, len(d.Raw))
	}

	// The same key for another message (its stream recreated) names
	// another object: the kept letter's body is not overwritten.
	other := *d
	other.Raw = bytes.Repeat([]byte{0xfe}, len(d.Raw))
	if err := c.Letters().Publish(ctx, c.Prefix().Dead(job), &other, job+"/seq/7"); err != nil {
		t.Fatal(err)
	}
	if body, err := c.Letters().Body(ctx, dead[0]); err != nil || !bytes.Equal(body, d.Raw) {
		t.Errorf("letter body after another message with its key: %d bytes (%v), want its own", len(body), err)
	}
}

// TestCancelledLetterLeavesNoStrayChunks cancels a letter's context while
// its object is being written, as a refusal or a leader's term ending
// would: the object is written to its end (or not at all), so every
// message of the object store belongs to an object List shows, and the
// sweep can free it. A write cut short by its context left chunks behind
// that belong to no object.
func TestCancelledLetterLeavesNoStrayChunks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	const job = "cut"
	body := bytes.Repeat(hugeBody(t), 9) // 64 chunks: still being written when the first arrives
	d := bus.MalformedLetter(job, c.Prefix().Work(job), body, nil, errors.New("unreadable"), time.Now())
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := c.Conn().Subscribe("$O."+lettersBucket+".C.>", func(*nats.Msg) { cancel() })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.Letters().Publish(pctx, c.Prefix().Dead(job), d, job+"/seq/1"); err == nil {
		t.Fatal("letter published under a cancelled context")
	}
	obs, err := c.JetStream().ObjectStore(ctx, lettersBucket)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	want := uint64(0) // each object's chunks and its meta message
	for _, o := range objects {
		want += uint64(o.Chunks) + 1
	}
	if got := streamMsgs(t, ctx, c, "OBJ_"+lettersBucket); got != want {
		t.Errorf("object store holds %d messages, its %d objects %d: %d stray chunks", got, len(objects), want, got-want)
	}
}
