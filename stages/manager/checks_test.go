package manager_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// checkCounter counts the checks of job: each asks for its work consumer.
func checkCounter(t *testing.T, e *env, job string) (seen func() int64) {
	t.Helper()
	var checks atomic.Int64
	sub, err := e.c.Conn().Subscribe("$JS.API.CONSUMER.INFO.PACE_WORK.work-"+job, func(*nats.Msg) { checks.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() int64 { // the checks counted once the server has passed them on
		t.Helper()
		if err := e.c.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		return checks.Load()
	}
}

// untilJustChecked runs passes until one checks the job whose checks seen
// counts: the job's next quiet check is then 300 passes away.
func untilJustChecked(e *env, seen func() int64) {
	for n := seen(); seen() == n; {
		e.m.Reconcile(context.Background())
	}
}

// atMostOneCheckIn299Passes runs 299 passes and requires that the job whose
// checks seen counts was checked at most once: its heartbeat is every 300.
func atMostOneCheckIn299Passes(t *testing.T, e *env, seen func() int64, what string) {
	t.Helper()
	before := seen()
	for range 299 {
		e.m.Reconcile(context.Background())
	}
	if got := seen() - before; got > 1 {
		t.Errorf("%s was checked %d times in 299 passes, want at most 1 (every 300)", what, got)
	}
}

// An idle running job whose stall clock runs (items wait for its workers,
// which do nothing) is checked on its quiet heartbeat, every 300 passes,
// and when its stall clock runs out, whatever the passes; its progress
// moving has it checked at the next pass. A thousand idle jobs would
// otherwise cost the bus thousands of requests a second.
func TestIdleJobsAreCheckedWhenTimeCallsForIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	stalling := e.submit("alice-token", `{"deadline":"1h","worker":{"exec":"cat"},"workload":{"items":["a"]}}`)
	moving := e.submit("alice-token", `{"deadline":"1h","worker":{"exec":"cat"},"failure":{"stall":"1h"},"workload":{"items":["a"]}}`)
	for _, id := range []string{stalling, moving} {
		if _, err := e.c.Jobs().Update(ctx, id, func(cur *schemas.JobRecord) (*schemas.JobRecord, error) {
			next := *cur
			next.Replicas = 1 // a worker runs, and does nothing
			return &next, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	seen := checkCounter(t, e, stalling)
	for range 2 { // a first check, and one that finds nothing new
		e.m.Reconcile(ctx)
	}
	atMostOneCheckIn299Passes(t, e, seen, "an idle job")
	// Its stall clock (the default 5 minutes) runs out: the next pass
	// checks it, and fails it.
	e.clock.Step(5 * time.Minute)
	e.m.Reconcile(ctx)
	if rec, err := e.c.Jobs().Status(ctx, stalling); err != nil || rec.State != schemas.Failed || !strings.Contains(rec.Reason, "stall") {
		t.Errorf("once its stall clock ran out: %+v %v, want failed by the stall rule", rec, err)
	}

	// The other job's progress moves: it is checked at the next pass, and
	// completes.
	id := moving
	seen = checkCounter(t, e, id)
	untilJustChecked(e, seen)
	e.work(id, 1, upper)
	bustest.Eventually(t, 20*time.Second, "the result", func() bool {
		n, err := e.c.Outputs().ResultCount(ctx, id)
		return err == nil && n == 1
	})
	bustest.Publish(t, e.c, e.c.Prefix().Metrics(id, schemas.ProgressMetrics), &schemas.Progress{Job: id, At: time.Now(), Done: 1})
	passes := 0
	bustest.Eventually(t, 20*time.Second, "completed after the progress", func() bool {
		e.m.Reconcile(ctx)
		passes++
		rec, err := e.c.Jobs().Status(ctx, id)
		if err == nil && rec.State != schemas.Completed {
			time.Sleep(20 * time.Millisecond) // for the manager to take the progress in
		}
		return err == nil && rec.State == schemas.Completed
	})
	if passes >= 30 {
		t.Errorf("completed %d passes after its progress, want fewer than 30: woken by it", passes)
	}
}

// A quiet job, whose stall clock does not run (here: no worker Pace runs),
// is checked every 300 passes once a check found nothing new: no check
// finds anything new in it until its progress moves (its workers included)
// or an event changes it.
func TestQuietJobsAreCheckedEveryFiveMinutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"1h","workload":{"items":["a"]}}`)
	seen := checkCounter(t, e, id)
	for range 300 { // its first check finds nothing new: the next is 300 passes later
		e.m.Reconcile(ctx)
	}
	atMostOneCheckIn299Passes(t, e, seen, "a quiet job")
	untilJustChecked(e, seen)
	// A worker shows up in its progress: it is checked at the next passes.
	bustest.Publish(t, e.c, e.c.Prefix().Metrics(id, schemas.ProgressMetrics),
		&schemas.Progress{Job: id, At: time.Now(), QueueLength: 1, Replicas: 1})
	n := seen()
	bustest.Eventually(t, 20*time.Second, "a check after the progress", func() bool {
		e.m.Reconcile(ctx)
		return seen() > n
	})
}

// A quiet streaming job that receives a result for an item it never queued
// has it set aside within a few passes, not at its quiet heartbeat minutes
// later: the collector's sample counts the result apart (unqueued), and the
// progress that says so wakes the job's check.
func TestUnqueuedResultsWakeAQuietJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	js := carelessClient(t, e)
	id := e.submit("alice-token", `{"mode":"streaming","deadline":"10m"}`)
	seen := checkCounter(t, e, id)
	for range 300 { // its first check finds nothing new: the next is 300 passes later
		e.m.Reconcile(ctx)
	}
	untilJustChecked(e, seen)
	rec := forgeResults(t, e, js, id, []string{"forged"})
	// What the collector samples: nothing moved but the result to set aside.
	bustest.Publish(t, e.c, e.c.Prefix().Metrics(id, schemas.ProgressMetrics),
		&schemas.Progress{Job: id, At: time.Now(), Mode: schemas.Streaming, Replicas: rec.Replicas, Unqueued: 1})
	passes := 0
	bustest.Eventually(t, 20*time.Second, "the forged result set aside", func() bool {
		e.m.Reconcile(ctx)
		passes++
		if e.results(id) != 0 {
			time.Sleep(20 * time.Millisecond) // for the manager to take the progress in
			return false
		}
		return true
	})
	if passes >= 30 {
		t.Errorf("set aside %d passes after the progress, want fewer than 30: woken by it", passes)
	}
	if l := mustLetters(t, e, id); len(l) != 1 || l[0].Reason != schemas.NeverQueued || l[0].ItemID != "forged" {
		t.Errorf("letters %+v, want one never_queued letter for item forged", l)
	}
}
