package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// testCtx bounds a test's calls generously: it ends a hung test, and a slow
// machine must not end a passing one.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runWorker runs w until the test ends, failing the test if Run errs.
func runWorker(t *testing.T, w *bus.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

func readResults(t *testing.T, ctx context.Context, c *bus.Client, job string) []*schemas.Result {
	t.Helper()
	var out []*schemas.Result
	for r, err := range c.Outputs().Results(ctx, job) {
		if err != nil {
			t.Fatalf("results: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func declare(t *testing.T, ctx context.Context, c *bus.Client, job string, timeout time.Duration, maxDeliveries int) {
	t.Helper()
	_, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming,
		ItemTimeout: schemas.Duration(timeout), MaxDeliveries: maxDeliveries})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPushWorkResults(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))

	items := bus.Items()
	for i := range 100 {
		items = append(items, schemas.WorkItem{Payload: fmt.Sprintf("item-%d", i)})
	}
	const pushTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	pushCtx := bus.WithTraceparent(bus.WithCorrelationID(ctx, "corr-42"), pushTrace)
	if err := c.PushItems(pushCtx, "upper", items); err != nil {
		t.Fatal(err)
	}
	w, err := c.Worker("upper", func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return strings.ToUpper(it.Payload), nil
	}, bus.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	got := map[string]string{}
	for _, r := range readResults(t, ctx, c, "upper") {
		if _, dup := got[r.ItemID]; dup {
			t.Fatalf("two results for %s", r.ItemID)
		}
		got[r.ItemID] = r.Output
	}
	for _, it := range items {
		if want := strings.ToUpper(it.Payload); got[it.ID] != want {
			t.Errorf("result of %s = %q, want %q", it.ID, got[it.ID], want)
		}
	}
	if len(got) != len(items) {
		t.Errorf("got %d results, want %d", len(got), len(items))
	}

	// The correlation id travels from the push through the worker to the result.
	st, err := c.JetStream().Stream(ctx, "PACE_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, c.Prefix().Results("upper", items[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if id := raw.Header.Get(schemas.HeaderCorrelationID); id != "corr-42" {
		t.Errorf("result correlation id = %q, want corr-42", id)
	}
	if s := raw.Header.Get(schemas.HeaderSchema); s != "result" {
		t.Errorf("result schema header = %q, want result", s)
	}
	// The trace goes on too: the same trace id and flags, a new span id.
	if tp := raw.Header.Get(schemas.HeaderTraceparent); len(tp) != 55 || tp[:36] != pushTrace[:36] ||
		tp[52:] != pushTrace[52:] || tp[36:52] == pushTrace[36:52] {
		t.Errorf("result traceparent = %q, want %s's trace with a new span id", tp, pushTrace)
	}
}

// TestNoTraceStartedWhileTracingIsOff checks that with tracing off, a push
// that continues no trace makes items and results without a traceparent,
// as a client without the SDK does, while they still share a correlation.
func TestNoTraceStartedWhileTracingIsOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	items := bus.Items("a")
	if err := c.PushItems(ctx, "untraced", items); err != nil {
		t.Fatal(err)
	}
	untraced := func(stream, subject string) {
		t.Helper()
		st, err := c.JetStream().Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		if tp := raw.Header.Get(schemas.HeaderTraceparent); tp != "" {
			t.Errorf("%s: traceparent %q, want none", stream, tp)
		}
		if id := raw.Header.Get(schemas.HeaderCorrelationID); id == "" {
			t.Errorf("%s: no correlation id", stream)
		}
	}
	untraced("PACE_WORK", c.Prefix().Work("untraced")) // read while queued
	w, err := c.Worker("untraced", func(_ context.Context, it *schemas.WorkItem) (string, error) {
		return it.Payload, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	readResults(t, ctx, c, "untraced")
	untraced("PACE_RESULTS", c.Prefix().Results("untraced", items[0].ID))
}

func TestLateResultDiscardedAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	declare(t, ctx, c, "slow", time.Second, 5)

	items := bus.Items("x")
	if err := c.PushItems(ctx, "slow", items); err != nil {
		t.Fatal(err)
	}
	took, release := make(chan struct{}), make(chan struct{})
	stalled, err := c.Worker("slow", func(context.Context, *schemas.WorkItem) (string, error) {
		close(took)
		<-release
		return "from the stalled worker", nil
	}, bus.WithHeartbeat(-1), bus.WithWorkerID("stalled"))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, stalled)
	<-took

	healthy, err := c.Worker("slow", func(context.Context, *schemas.WorkItem) (string, error) {
		return "from the healthy worker", nil
	}, bus.WithWorkerID("healthy"))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, healthy)
	bustest.Eventually(t, 10*time.Second, "redelivery to the healthy worker", func() bool {
		return healthy.Stats().Processed == 1
	})
	close(release)
	bustest.Eventually(t, 10*time.Second, "the late result to be discarded", func() bool {
		return stalled.Stats().Duplicates == 1
	})

	got := readResults(t, ctx, c, "slow")
	if len(got) != 1 || got[0].Output != "from the healthy worker" || got[0].Attempt != 2 {
		t.Fatalf("results = %+v, want one from the healthy worker's second delivery", got)
	}
}

func TestInProgressAcksKeepSlowItem(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	// Leases of 2s, extended every third of that: a machine too slow to
	// extend one in time would redeliver the item and fail the test.
	declare(t, ctx, c, "long", 2*time.Second, 5)
	if err := c.PushItems(ctx, "long", bus.Items("x")); err != nil {
		t.Fatal(err)
	}
	var calls sync.Map
	handler := func(id string) bus.Handler {
		return func(ctx context.Context, _ *schemas.WorkItem) (string, error) {
			calls.Store(id, true)
			select { // the item takes three leases' worth of work
			case <-time.After(6 * time.Second):
				return "done by " + id, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	first, _ := c.Worker("long", handler("first"))
	runWorker(t, first)
	bustest.Eventually(t, 5*time.Second, "the first worker to take the item", func() bool {
		_, ok := calls.Load("first")
		return ok
	})
	second, _ := c.Worker("long", handler("second"))
	runWorker(t, second)

	got := readResults(t, ctx, c, "long")
	if len(got) != 1 || got[0].Output != "done by first" || got[0].Attempt != 1 {
		t.Fatalf("results = %+v, want one from the first delivery", got)
	}
	if _, ok := calls.Load("second"); ok {
		t.Error("the item was redelivered although its worker extended the lease")
	}
}

func TestPoisonAndMalformedItemsAreDeadLettered(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	bustest.KeepLedger(t, c)
	declare(t, ctx, c, "poison", time.Second, 3)
	dlCtx, stopDL := context.WithCancel(ctx)
	dlDone := make(chan error, 1)
	go func() { dlDone <- c.Letters().Move(dlCtx) }()
	t.Cleanup(func() { stopDL(); <-dlDone })

	items := bus.Items("bad", "good")
	if err := c.PushItems(ctx, "poison", items); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JetStream().Publish(ctx, c.Prefix().Work("poison"), []byte("not json {")); err != nil {
		t.Fatal(err)
	}
	w, _ := c.Worker("poison", func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if it.Payload == "bad" {
			return "", errors.New("boom: cannot parse bad")
		}
		return "ok", nil
	}, bus.WithRetryDelay(50*time.Millisecond, 100*time.Millisecond))
	runWorker(t, w)

	dead := readDead(t, ctx, c, "poison", 2)
	byReason := map[schemas.DeadReason]*schemas.DeadLetter{}
	for _, d := range dead {
		byReason[d.Reason] = d
	}
	p := byReason[schemas.MaxDeliveries]
	if p == nil || p.ItemID != items[0].ID || p.Payload != "bad" || p.Deliveries != 3 || !strings.Contains(p.LastError, "boom") {
		t.Errorf("poison dead letter = %+v, want item %s, 3 deliveries, last error boom", p, items[0].ID)
	}
	m := byReason[schemas.Malformed]
	if m == nil || string(m.Raw) != "not json {" || m.LastError == "" {
		t.Errorf("malformed dead letter = %+v, want the raw payload and the decode error", m)
	}
	if got := readResults(t, ctx, c, "poison"); len(got) != 1 || got[0].ItemID != items[1].ID {
		t.Errorf("results = %+v, want only the good item's", got)
	}
	st, _ := c.JetStream().Stream(ctx, "PACE_WORK")
	bustest.Eventually(t, 5*time.Second, "the work stream to be empty", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}

// readDead waits for n dead letters of job and returns them.
func readDead(t *testing.T, ctx context.Context, c *bus.Client, job string, n int) []*schemas.DeadLetter {
	t.Helper()
	cons, err := c.JetStream().OrderedConsumer(ctx, "PACE_DEAD", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.Prefix().Dead(job)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*schemas.DeadLetter
	for len(out) < n {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
		if err != nil {
			t.Fatalf("dead letter %d of %d: %v", len(out)+1, n, err)
		}
		d, err := bus.Decode[schemas.DeadLetter](msg.Data(), msg.Headers())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	good, _ := json.Marshal(schemas.WorkItem{ID: "a", Job: "j"})
	tests := []struct {
		name   string
		data   string
		schema string
		ver    string
	}{
		{"not json", "{", "", ""},
		{"invalid id", `{"id":"a.b","job":"j"}`, "", ""},
		{"other schema", string(good), "result", "1"},
		{"newer version", string(good), "work_item", "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string][]string{}
			if tt.schema != "" {
				h[schemas.HeaderSchema] = []string{tt.schema}
				h[schemas.HeaderSchemaVersion] = []string{tt.ver}
			}
			if _, err := bus.Decode[schemas.WorkItem]([]byte(tt.data), h); !errors.Is(err, bus.ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
	if _, err := bus.Decode[schemas.WorkItem](good, nil); err != nil {
		t.Errorf("headerless valid item: %v", err)
	}
}

// TestPushToAFinishedJob checks the refusal says why: the final state, and
// the stop request only when there is one.
func TestPushToAFinishedJob(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	items := func() []schemas.WorkItem { return []schemas.WorkItem{{Payload: "x"}} }
	for _, tc := range []struct {
		job  string
		set  func(*schemas.JobRecord)
		want string
	}{
		{"done", func(r *schemas.JobRecord) { r.State = schemas.Completed }, "push to done: job is finished (completed)"},
		{"stopping", func(r *schemas.JobRecord) { r.StopRequested = true }, "push to stopping: job is finished (ongoing, stop requested)"},
	} {
		if err := c.PushItems(ctx, tc.job, items()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Jobs().Update(ctx, tc.job, func(r *schemas.JobRecord) (*schemas.JobRecord, error) { tc.set(r); return r, nil }); err != nil {
			t.Fatal(err)
		}
		err := c.PushItems(ctx, tc.job, items())
		if !errors.Is(err, bus.ErrJobFinished) || err.Error() != tc.want {
			t.Errorf("push = %v, want %q", err, tc.want)
		}
	}
}

// A push of more items than the client keeps in flight stores each once,
// and one whose item is refused as it is sent stores every item before
// it, none after it, and returns only once those before it are stored.
func TestPushItemsBeyondItsWindow(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	stored := func(job string) uint64 {
		t.Helper()
		st, err := c.JetStream().Stream(ctx, "PACE_WORK")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.Prefix().Work(job)))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[c.Prefix().Work(job)]
	}
	items := make([]schemas.WorkItem, 10_000)
	for i := range items {
		items[i].Payload = fmt.Sprint(i)
	}
	if err := c.PushItems(ctx, "many", items); err != nil {
		t.Fatal(err)
	}
	// Pushed again with the ids now assigned, they are stored once.
	if err := c.PushItems(ctx, "many", items[:5000]); err != nil {
		t.Fatal(err)
	}
	if n := stored("many"); n != 10_000 {
		t.Errorf("stored %d items, want 10000", n)
	}

	items = items[:0]
	for i := range 9000 {
		items = append(items, schemas.WorkItem{Payload: fmt.Sprint(i)})
	}
	items[6000].Payload = strings.Repeat("x", 2<<20) // over the server's max_payload
	err := c.PushItems(ctx, "broken", items)
	if err == nil || !strings.Contains(err.Error(), "push item "+items[6000].ID) {
		t.Fatalf("push = %v, want item %s refused", err, items[6000].ID)
	}
	if n := stored("broken"); n != 6000 {
		t.Errorf("stored %d items, want the 6000 before the refused one", n)
	}
}

// A job's worker.timeout bounds each item's run: a handler that would hang
// has its context cancelled with the timeout, the attempt fails with
// "timed out after 1s", and after max_deliveries the item is dead-lettered
// with that error; other items are untouched.
func TestHungItemsTimeOutIntoDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	bustest.KeepLedger(t, c)
	_, err := c.DeclareJob(ctx, "hang", schemas.JobSpec{Mode: schemas.Streaming, ItemTimeout: schemas.Duration(30 * time.Second),
		MaxDeliveries: 2, Worker: schemas.WorkerSpec{Timeout: schemas.Duration(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	dlCtx, stopDL := context.WithCancel(ctx)
	dlDone := make(chan error, 1)
	go func() { dlDone <- c.Letters().Move(dlCtx) }()
	t.Cleanup(func() { stopDL(); <-dlDone })
	items := bus.Items("hang", "quick")
	if err := c.PushItems(ctx, "hang", items); err != nil {
		t.Fatal(err)
	}
	var opened *schemas.JobRecord
	w, err := c.Worker("hang", func(ctx context.Context, it *schemas.WorkItem) (string, error) {
		if it.Payload == "hang" {
			<-ctx.Done() // as a command killed by its context
			return "", ctx.Err()
		}
		return "ok", nil
	}, bus.WithRetryDelay(50*time.Millisecond, 100*time.Millisecond), bus.WithJobOpened(func(r *schemas.JobRecord) { opened = r }))
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	dead := readDead(t, ctx, c, "hang", 1)[0]
	if dead.ItemID != items[0].ID || dead.Reason != schemas.MaxDeliveries || dead.Deliveries != 2 ||
		!strings.HasPrefix(dead.LastError, "timed out after 1s") {
		t.Errorf("dead letter = %+v, want the hung item after 2 deliveries, timed out after 1s", dead)
	}
	if got := readResults(t, ctx, c, "hang"); len(got) != 1 || got[0].ItemID != items[1].ID {
		t.Errorf("results = %+v, want the quick item's alone", got)
	}
	if opened == nil || opened.Spec.Worker.Timeout.D() != time.Second {
		t.Errorf("WithJobOpened saw %+v, want the job's record", opened)
	}
}
