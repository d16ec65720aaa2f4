package manager_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// A job whose workers fail its items before any succeeds is failed (rule
// before_first_result), with the workers' last error; one whose first item
// succeeded is not, however many fail after.
func TestWorkersFailingBeforeTheFirstResultFailTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	broken := e.submit("alice-token", `{"deadline":"1h","worker":{"exec":"not-a-command"},"workload":{"items":["a","b","c","d"]}}`)
	e.work(broken, 2, func(context.Context, *schemas.WorkItem) (string, error) {
		return "", errors.New("sh: 1: not-a-command: not found")
	})
	e.waitState(broken, schemas.Failed)
	rec, err := e.c.Jobs().Status(context.Background(), broken)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Reason, "before_first_result") || !strings.Contains(rec.Reason, "not-a-command: not found") {
		t.Errorf("reason = %q, want the rule and the last error", rec.Reason)
	}

	flaky := e.submit("alice-token", `{"deadline":"1h","max_deliveries":50,"worker":{"exec":"cat"},"workload":{"items":["first","b","c","d","e"]}}`)
	e.work(flaky, 1, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if it.Payload == "first" {
			return "ok", nil
		}
		return "", errors.New("flaky")
	})
	e.waitForResults(flaky, 1)
	for range 20 {
		e.m.Reconcile(context.Background())
		time.Sleep(50 * time.Millisecond)
	}
	if rec, _ := e.c.Jobs().Status(context.Background(), flaky); rec.State != schemas.Ongoing {
		t.Errorf("a job with a result: %s (%s), want ongoing", rec.State, rec.Reason)
	}
}

// A job with waiting items and workers that makes no progress for its stall
// time is failed (rule stall); progress restarts the clock, and the rule can
// be turned off.
func TestAStalledJobFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	stalled := e.submit("alice-token", `{"deadline":"1h","worker":{"exec":"cat"},"failure":{"stall":"10m"},"workload":{"items":["a","b"]}}`)
	off := e.submit("alice-token", `{"deadline":"1h","worker":{"exec":"cat"},"failure":{"stall":"10m","disable":["stall"]},"workload":{"items":["a"]}}`)
	for _, id := range []string{stalled, off} {
		if _, err := e.c.Jobs().Update(ctx, id, func(cur *schemas.JobRecord) (*schemas.JobRecord, error) {
			next := *cur
			next.Replicas = 2 // as the runtime reports: workers run, and do nothing
			return &next, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// An idle job is checked when its stall clock runs out, or at the next
	// pass once its progress moved; Run's own passes run beside the test's.
	checkAll := func() {
		for range 3 {
			e.m.Reconcile(ctx)
		}
	}
	checkAll()
	e.clock.Step(9 * time.Minute)
	checkAll()
	if rec, _ := e.c.Jobs().Status(ctx, stalled); rec.State != schemas.Ongoing {
		t.Fatalf("after 9 of 10 minutes: %s (%s)", rec.State, rec.Reason)
	}
	// Progress: the clock restarts.
	e.work(stalled, 1, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		if it.Payload == "a" {
			return "A", nil
		}
		<-e.t.Context().Done() // b never finishes
		return "", e.t.Context().Err()
	})
	e.waitForResults(stalled, 1)
	// The collector's sample of that progress wakes the job's check.
	seen := checkCounter(t, e, stalled)
	bustest.Publish(t, e.c, e.c.Prefix().Metrics(stalled, schemas.ProgressMetrics),
		&schemas.Progress{Job: stalled, At: time.Now(), Done: 1, InFlight: 1, Replicas: 2})
	n := seen()
	bustest.Eventually(t, 20*time.Second, "a check after the progress", func() bool {
		e.m.Reconcile(ctx)
		return seen() > n
	})
	e.clock.Step(9 * time.Minute)
	checkAll()
	if rec, _ := e.c.Jobs().Status(ctx, stalled); rec.State != schemas.Ongoing {
		t.Fatalf("9 minutes after its progress: %s (%s)", rec.State, rec.Reason)
	}
	e.clock.Step(2 * time.Minute)
	checkAll()
	rec, _ := e.c.Jobs().Status(ctx, stalled)
	if rec.State != schemas.Failed || !strings.Contains(rec.Reason, "stall: no progress for 11m0s with 2 workers and 1 items waiting") {
		t.Errorf("after 11 minutes without progress: %s (%s), want failed by the stall rule", rec.State, rec.Reason)
	}
	if rec, _ := e.c.Jobs().Status(ctx, off); rec.State != schemas.Ongoing {
		t.Errorf("with the rule off: %s (%s), want ongoing", rec.State, rec.Reason)
	}
}

// pace.control.fail fails a running job with the reason given, and answers
// a finished one as it is; the request is validated.
func TestFailOverNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"1h","worker":{"exec":"cat"},"workload":{"items":["a"]}}`)
	if err := e.c.Jobs().Fail(ctx, id, "its workers broke"); err != nil {
		t.Fatal(err)
	}
	rec, _ := e.c.Jobs().Status(ctx, id)
	if rec.State != schemas.Failed || rec.Reason != "its workers broke" {
		t.Errorf("after fail: %s (%s)", rec.State, rec.Reason)
	}
	if err := e.c.Jobs().Fail(ctx, id, "again"); err != nil {
		t.Errorf("failing a failed job: %v", err)
	}
	var apiErr *schemas.APIError
	if err := e.c.Jobs().Fail(ctx, id, " "); !errors.As(err, &apiErr) || apiErr.Code != 400 || !strings.Contains(apiErr.Message, "reason") {
		t.Errorf("no reason: %v, want a 400 naming reason", err)
	}
	if err := e.c.Jobs().Fail(ctx, "no-such-job", "x"); !errors.As(err, &apiErr) || apiErr.Code != 404 {
		t.Errorf("unknown job: %v, want 404", err)
	}
}

// waitForResults waits until job has n results.
func (e *env) waitForResults(job string, n int) {
	e.t.Helper()
	bustest.Eventually(e.t, 20*time.Second, "results of "+job, func() bool {
		got, err := e.c.Outputs().ResultCount(context.Background(), job)
		return err == nil && got >= n
	})
}
