package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// syncBuffer is a bytes.Buffer safe for a logger used by several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProvisionIsIdempotentAndCorrectsDrift(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var logs syncBuffer
	c := bustest.Client(t, bustest.Server(t), bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	names := []string{"PACE_JOBS", "PACE_WORK", "PACE_RESULTS", "PACE_LEDGER", "PACE_DEAD", "PACE_METRICS", "PACE_DECISIONS",
		"PACE_K8S", "PACE_K8S_OUTCOMES", "PACE_ADMISSION", "PACE_LOGS", "PACE_ADVISORIES", "KV_pace_jobs"}
	for _, name := range names {
		if _, err := c.JetStream().Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}

	// Someone shortens the metrics retention by hand.
	st, _ := c.JetStream().Stream(ctx, "PACE_METRICS")
	cfg := st.CachedInfo().Config
	cfg.MaxAge = time.Hour
	if _, err := c.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	st, _ = c.JetStream().Stream(ctx, "PACE_METRICS")
	if got := st.CachedInfo().Config.MaxAge; got != 7*24*time.Hour {
		t.Errorf("metrics max age after re-provisioning = %s, want 168h", got)
	}
	out := logs.String()
	if !strings.Contains(out, "config drift") || !strings.Contains(out, "PACE_METRICS") || !strings.Contains(out, "max_age") {
		t.Errorf("drift not logged with the stream and field:\n%s", out)
	}
	if strings.Count(out, "config drift") != 1 {
		t.Errorf("re-provisioning an unchanged bus logged drift:\n%s", out)
	}
}

func TestConnectGivesUpOnUnreachableServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := bus.Connect(ctx, "nats://"+freeAddr(t), bus.WithConnectTimeout(300*time.Millisecond))
	if err == nil {
		t.Fatal("connect to a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "connect to nats") {
		t.Errorf("err = %v, want it to say what failed", err)
	}
}

func TestMoreJobsThanTheServersDefaultConsumerLimit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	var g errgroup.Group
	g.SetLimit(8)
	for i := range 1010 { // the server's default is 1,000 consumers per stream
		g.Go(func() error {
			job := fmt.Sprintf("job-%d", i)
			_, err := c.JetStream().CreateOrUpdateConsumer(ctx, "PACE_WORK", jetstream.ConsumerConfig{
				Durable: "work-" + job, FilterSubject: c.Prefix().Work(job), AckPolicy: jetstream.AckExplicitPolicy})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestProvisionBoundsEveryStream: every stream has a byte bound by default
// (issue 19: PACE_DECISIONS had none), the streams whose messages are items
// or requests keep discarding new ones when full, a bound removed by hand
// is put back, and Limits.StreamMaxBytes changes one.
func TestProvisionBoundsEveryStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	discardNew := map[string]bool{"PACE_WORK": true, "PACE_RESULTS": true, "PACE_LEDGER": true, "PACE_DEAD": true, "PACE_K8S": true}
	config := func(name string) jetstream.StreamConfig {
		t.Helper()
		st, err := c.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	var total int64
	for _, name := range []string{"PACE_JOBS", "PACE_WORK", "PACE_RESULTS", "PACE_LEDGER", "PACE_DEAD", "PACE_METRICS",
		"PACE_DECISIONS", "PACE_K8S", "PACE_K8S_OUTCOMES", "PACE_ADMISSION", "PACE_LOGS", "PACE_ADVISORIES"} {
		cfg := config(name)
		if cfg.MaxBytes <= 0 {
			t.Errorf("%s: max bytes %d, want a bound", name, cfg.MaxBytes)
		}
		total += cfg.MaxBytes
		if want := discardNew[name]; (cfg.Discard == jetstream.DiscardNew) != want {
			t.Errorf("%s: discard %v, want discard new %v", name, cfg.Discard, want)
		}
	}
	if total > 512<<20 {
		t.Errorf("the bounds reserve %d MiB together, too much of the 1 GiB store of the smallest server", total>>20)
	}
	for _, name := range []string{"KV_pace_jobs", "KV_pace_failures", "KV_pace_workers", "KV_pace_flowcontrol", "KV_pace_leases",
		"OBJ_pace_dead_letters"} {
		if cfg := config(name); cfg.MaxBytes <= 0 {
			t.Errorf("%s: max bytes %d, want a bound", name, cfg.MaxBytes)
		}
	}
	const decisions = (600 << 20) / 1000 * 30 // 3 % of the default store
	if got := config("PACE_DECISIONS").MaxBytes; got != decisions {
		t.Errorf("PACE_DECISIONS max bytes %d, want 3 %% of 600 MiB", got)
	}

	// Someone lifts the decisions' bound by hand: provisioning puts it back.
	cfg := config("PACE_DECISIONS")
	cfg.MaxBytes = -1
	if _, err := c.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := config("PACE_DECISIONS").MaxBytes; got != decisions {
		t.Errorf("PACE_DECISIONS max bytes after re-provisioning %d, want %d", got, decisions)
	}

	// A larger store: every default bound is its share of it.
	if err := c.Provision(ctx, bus.Limits{StoreBytes: 900 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, want := config("PACE_WORK").MaxBytes, int64(900<<20)/1000*250; got != want {
		t.Errorf("PACE_WORK max bytes with a 900 MiB store %d, want a quarter, %d", got, want)
	}

	// An operator's bounds: one smaller, one removed.
	if err := c.Provision(ctx, bus.Limits{StreamMaxBytes: map[string]int64{"DECISIONS": 1 << 20, "LOGS": -1}}); err != nil {
		t.Fatal(err)
	}
	if got := config("PACE_DECISIONS").MaxBytes; got != 1<<20 {
		t.Errorf("PACE_DECISIONS max bytes %d, want 1 MiB", got)
	}
	if got := config("PACE_LOGS").MaxBytes; got != -1 {
		t.Errorf("PACE_LOGS max bytes %d, want none (-1)", got)
	}
}

// TestProvisionMovesAWorkQueueWorkStream: a bus provisioned before the
// ledger has a work-queue PACE_WORK, whose retention JetStream cannot
// change. Provisioning moves it to interest retention: the items wait on
// the new stream (the one a worker held comes back), the job's consumer is
// made again, the results it had are in its ledger, and the holding stream
// is gone. The ledger then takes in the items, and their results count.
func TestProvisionMovesAWorkQueueWorkStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var logs syncBuffer
	c := bustest.Client(t, bustest.Server(t), bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	js := c.JetStream()
	st, err := js.Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	old := st.CachedInfo().Config
	old.Retention = jetstream.WorkQueuePolicy
	for _, name := range []string{"PACE_WORK", "PACE_LEDGER"} { // neither existed then
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	declare(t, ctx, c, "j1", time.Minute, 3)
	if err := c.PushItems(ctx, "j1", bus.Items("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishResult(ctx, &schemas.Result{Job: "j1", ItemID: "before", Output: "x", FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	held, err := js.Consumer(ctx, "PACE_WORK", "work-j1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := held.Fetch(1); err != nil {
		t.Fatal(err)
	} else {
		for range b.Messages() { // held, never acknowledged
		}
	}

	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	st, err = js.Stream(ctx, "PACE_WORK")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Retention; got != jetstream.InterestPolicy {
		t.Errorf("work stream retention after provisioning = %v, want interest", got)
	}
	if _, err := js.Stream(ctx, "PACE_WORK_MIGRATION"); err == nil {
		t.Error("the holding stream is still there")
	}
	if q, err := c.Queues().QueuedWork(ctx); err != nil || q.Subjects["pace.work.j1"] != 3 {
		t.Errorf("items of j1 after the move: %v (%v), want 3", q.Subjects, err)
	}
	if !strings.Contains(logs.String(), "moved to interest retention") {
		t.Errorf("the move is not logged:\n%s", logs.String())
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil { // nothing more to move
		t.Fatal(err)
	}

	bustest.KeepLedger(t, c)
	w, err := c.Worker("j1", func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil })
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	rec, err := c.Jobs().Status(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 20*time.Second, "the moved items processed and counted", func() bool {
		ws, err := c.JobWork(ctx, rec)
		return err == nil && ws.Results == 4 && ws.NeverQueued == 0 && ws.Pending == 0 && ws.InFlight == 0
	})
}
