package bus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

func TestTemporary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("open jobs bucket: %w", context.DeadlineExceeded), true},
		{nats.ErrNoResponders, true},
		{nats.ErrTimeout, true},
		{fmt.Errorf("consume raw samples: %w", jetstream.ErrNoHeartbeat), true}, // seen when a NATS server was killed
		{jetstream.ErrJetStreamNotEnabled, true},                                // 503 while a cluster elects its meta leader
		{&jetstream.APIError{Code: 500, ErrorCode: 10008, Description: "jetstream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, false},
		{jetstream.ErrBucketNotFound, false},
		{nats.ErrPermissionViolation, false},
		{bus.ErrJobFinished, false},
		{fmt.Errorf("%w: nil handler", bus.ErrInvalidOption), false},
	} {
		if got := bus.Temporary(tc.err); got != tc.want {
			t.Errorf("Temporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRetryTemporaryStopsAtARefusal(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	calls := 0
	refused := errors.New("refused")
	err := bus.RetryTemporary(ctx, slog.New(slog.DiscardHandler), time.Minute, "step", func(context.Context) error {
		calls++
		if calls < 3 {
			return nats.ErrNoResponders
		}
		return refused
	})
	if !errors.Is(err, refused) || calls != 3 {
		t.Fatalf("err %v after %d calls, want the refusal after 3", err, calls)
	}
	calls = 0
	err = bus.RetryTemporary(ctx, slog.New(slog.DiscardHandler), 300*time.Millisecond, "step", func(context.Context) error {
		calls++
		return nats.ErrTimeout
	})
	if !errors.Is(err, nats.ErrTimeout) || calls < 2 {
		t.Fatalf("err %v after %d calls, want the timeout after retries within the budget", err, calls)
	}
}

// A worker started while its only server is down waits for it, instead of
// exiting, and works once the server is back.
func TestWorkerStartedDuringAnOutageWaitsForTheServer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir, addr := t.TempDir(), freeAddr(t)
	s := bustest.ServerAt(t, dir, addr)
	bustest.Client(t, s)
	wc, err := bus.Connect(ctx, "nats://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wc.Close(context.Background()) })
	s.Shutdown()

	echo := func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil }
	w, err := wc.Worker("outage", echo)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	// nats.go buffers requests while it reconnects and JetStream's API
	// calls time out after 5s: an outage longer than that fails the
	// worker's first attempt to open its job.
	time.Sleep(6 * time.Second)
	c := bustest.Client(t, bustest.ServerAt(t, dir, addr))
	items := manyItems(20)
	if err := c.PushItems(ctx, "outage", items); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, items, readResults(t, ctx, c, "outage"))
}

// TestRetryWaitIsLoggedAsADuration checks retry_in reads "200ms" in JSON
// logs, not nanoseconds, and that an unreachable URL is ErrNoServers.
func TestRetryWaitIsLoggedAsADuration(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	_, err := bus.Connect(testCtx(t), "nats://"+freeAddr(t), bus.WithLogger(log), bus.WithConnectTimeout(time.Second))
	if !errors.Is(err, bus.ErrNoServers) {
		t.Fatalf("connect to a closed port = %v, want ErrNoServers", err)
	}
	calls := 0
	_ = bus.RetryTemporary(testCtx(t), log, time.Minute, "step", func(context.Context) error {
		if calls++; calls < 2 {
			return nats.ErrTimeout
		}
		return nil
	})
	n := 0
	for line := range bytes.Lines(logs.Bytes()) {
		var rec struct {
			Msg     string `json:"msg"`
			RetryIn any    `json:"retry_in"`
		}
		if err := json.Unmarshal(line, &rec); err != nil || rec.RetryIn == nil {
			continue
		}
		n++
		if s, ok := rec.RetryIn.(string); !ok {
			t.Errorf("%s: retry_in = %v, want a duration string", rec.Msg, rec.RetryIn)
		} else if _, err := time.ParseDuration(s); err != nil {
			t.Errorf("%s: retry_in %q: %v", rec.Msg, s, err)
		}
	}
	if n < 2 {
		t.Errorf("%d log lines with retry_in, want one of Connect and one of RetryTemporary:\n%s", n, logs.String())
	}
}
