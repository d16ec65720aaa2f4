package manager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/collector"
)

// TestRedrivenItemCountsOnce runs a batch job of three items on a real
// server: "bad" uses up its deliveries and is dead-lettered while "slow"
// holds the job open; the letter is redriven and the item succeeds. While
// it runs, the job must not end (the two other results plus the letter
// would make three); then it must end completed, counted by the manager and
// the collector as 3 done and 0 dead, with exactly one result per item.
// The same holds when the redrive is interrupted after it sent the item
// and before it removed the letter.
func TestRedrivenItemCountsOnce(t *testing.T) {
	t.Parallel()
	t.Run("redrive", func(t *testing.T) { testRedrivenItem(t, false) })
	t.Run("interrupted", func(t *testing.T) { testRedrivenItem(t, true) })
}

func testRedrivenItem(t *testing.T, interrupted bool) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.submit("alice-token", `{"deadline":"10m","max_deliveries":2,"workload":{"items":["ok","bad","slow"]}}`)
	fixed, badRuns, releaseBad, releaseSlow := make(chan struct{}), make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	e.work(id, 3, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		switch it.Payload {
		case "slow":
			<-releaseSlow
		case "bad":
			select {
			case <-fixed:
			default:
				return "", errors.New("not yet")
			}
			badRuns <- struct{}{}
			<-releaseBad
		}
		return "done " + it.Payload, nil
	})
	t.Cleanup(func() { close(releaseSlow); close(releaseBad) }) // runs before e.work's cleanup
	dlCtx, stopDL := context.WithCancel(ctx)
	dlDone := make(chan error, 1)
	go func() { dlDone <- e.c.Letters().Move(dlCtx) }()
	t.Cleanup(func() { stopDL(); <-dlDone })

	var letter *bus.StoredLetter
	bustest.Eventually(t, 20*time.Second, "bad dead-lettered", func() bool {
		for l, err := range e.c.Letters().List(ctx, bus.DeadItems, id, false) {
			if err != nil {
				t.Fatal(err)
			}
			letter = l
		}
		return letter != nil
	})
	e.m.Reconcile(ctx)
	if rec, err := e.c.Jobs().Status(ctx, id); err != nil || rec.State != schemas.Ongoing {
		t.Fatalf("job %s before the redrive: %v (%v), want ongoing while slow runs", id, rec.State, err)
	}

	close(fixed)
	if !interrupted {
		if err := e.c.Letters().Redrive(ctx, letter); err != nil {
			t.Fatal(err)
		}
	} else { // what Redrive sends, the letter left in place
		msg, err := bus.NewMsg(ctx, e.c.Prefix().Work(id), &schemas.WorkItem{ID: letter.ItemID, Job: id, Payload: letter.Payload})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.JetStream().PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	<-badRuns
	releaseSlow <- struct{}{}
	rec, err := e.c.Jobs().Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 20*time.Second, "slow's result", func() bool {
		ws, err := e.c.JobWork(ctx, rec)
		return err == nil && ws.Results == 2
	})
	e.m.Reconcile(ctx)
	if rec, err := e.c.Jobs().Status(ctx, id); err != nil || rec.State != schemas.Ongoing {
		t.Fatalf("job %s while the redriven item runs: %v (%v), want ongoing", id, rec.State, err)
	}

	releaseBad <- struct{}{}
	e.waitState(id, schemas.Completed)
	if v := e.status("alice-token", id); v["done"] != 3.0 || v["dead"] != 0.0 {
		t.Errorf("view done = %v, dead = %v, want 3 and 0", v["done"], v["dead"])
	}
	col, err := collector.New(collector.Deps{Bus: e.c}, collector.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err = e.c.Jobs().Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The collector counts letters in one request per round: one left
	// behind by an interrupted redrive still shows in its sample.
	if s, err := col.Sample(ctx, rec); err != nil || s.Done != 3 || (s.Dead != 0) != interrupted {
		t.Errorf("collector sample = %+v (%v), want 3 done and %d dead", s, err, map[bool]int{true: 1}[interrupted])
	}
	results, err := e.c.Outputs().StoredResults(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range results {
		seen[r.ItemID]++
	}
	if len(results) != 3 || len(seen) != 3 {
		t.Errorf("results = %d for items %v, want exactly one for each of 3", len(results), seen)
	}
	if err := e.c.Letters().Redrive(ctx, letter); err == nil {
		t.Error("redriving the letter again succeeded, want an error: the job is finished")
	}
}
