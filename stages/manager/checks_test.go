package manager_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// An idle running job is checked less and less often (every 2, 4, … up to
// 30 job-check passes), and at the next pass again when its progress moves:
// a thousand idle jobs would cost the bus thousands of requests a second.
func TestIdleJobsAreCheckedLessOften(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"1h","workload":{"items":["a"]}}`)
	// Each check asks for the job's work consumer.
	var checks atomic.Int64
	sub, err := e.c.Conn().Subscribe("$JS.API.CONSUMER.INFO.PACE_WORK.work-"+id, func(*nats.Msg) { checks.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	seen := func() int64 { // the checks counted once the server has passed them on
		t.Helper()
		if err := e.c.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		return checks.Load()
	}
	for range 100 { // backs off to the longest wait
		e.m.Reconcile(ctx)
	}
	before := seen()
	for range 90 {
		e.m.Reconcile(ctx)
	}
	if got := seen() - before; got < 2 || got > 4 {
		t.Errorf("an idle job was checked %d times in 90 passes, want 3 (every 30)", got)
	}
	for n := seen(); seen() == n; { // until a check has just happened: the next is 30 passes away
		e.m.Reconcile(ctx)
	}
	// Its progress moves: it is checked at the next pass, and completes.
	e.work(id, 1, upper)
	bustest.Eventually(t, 20*time.Second, "the result", func() bool {
		n, err := e.c.ResultCount(ctx, id)
		return err == nil && n == 1
	})
	bustest.Publish(t, e.c, e.c.Prefix().Metrics(id, schemas.ProgressMetrics), &schemas.Progress{Job: id, At: time.Now(), Done: 1})
	passes := 0
	bustest.Eventually(t, 20*time.Second, "completed after the progress", func() bool {
		e.m.Reconcile(ctx)
		passes++
		rec, err := e.c.Status(ctx, id)
		if err == nil && rec.State != schemas.Completed {
			time.Sleep(20 * time.Millisecond) // for the manager to take the progress in
		}
		return err == nil && rec.State == schemas.Completed
	})
	if passes >= 30 {
		t.Errorf("completed %d passes after its progress, want fewer than 30: woken by it", passes)
	}
}
