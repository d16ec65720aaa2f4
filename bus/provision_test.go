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
	ctx := testCtx(t)
	var logs syncBuffer
	c := bustest.Client(t, bustest.Server(t), bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	names := []string{"PACE_JOBS", "PACE_WORK", "PACE_RESULTS", "PACE_DEAD", "PACE_METRICS", "PACE_DECISIONS",
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
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	discardNew := map[string]bool{"PACE_WORK": true, "PACE_RESULTS": true, "PACE_DEAD": true, "PACE_K8S": true}
	config := func(name string) jetstream.StreamConfig {
		t.Helper()
		st, err := c.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	var total int64
	for _, name := range []string{"PACE_JOBS", "PACE_WORK", "PACE_RESULTS", "PACE_DEAD", "PACE_METRICS", "PACE_DECISIONS",
		"PACE_K8S", "PACE_K8S_OUTCOMES", "PACE_ADMISSION", "PACE_LOGS", "PACE_ADVISORIES"} {
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
