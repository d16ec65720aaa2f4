package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestLedgerBehindSetsNothingAside: a streaming job's items are processed
// while no ledger runs (its manager is down, or lags behind the job's end).
// Their results do not count yet, and nothing is set aside, since the
// ledger has not seen the items stored before them. The ledger then takes
// the items in for a job that has finished (entered, not released: they
// stay for the stray sweep), and the results count.
func TestLedgerBehindSetsNothingAside(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	declare(t, ctx, c, "late", time.Minute, 3)
	if err := c.PushItems(ctx, "late", bus.Items("a", "b")); err != nil {
		t.Fatal(err)
	}
	w, err := c.Worker("late", func(_ context.Context, it *schemas.WorkItem) (string, error) { return it.Payload, nil })
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	rec, err := c.Jobs().Status(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, "both items processed", func() bool {
		ws, err := c.JobWork(ctx, rec)
		return err == nil && ws.Pending == 0 && ws.InFlight == 0 && ws.NeverQueued == 2
	})
	if ws, err := c.JobWork(ctx, rec); err != nil || ws.Results != 0 {
		t.Fatalf("work before the ledger = %+v (%v), want no result counted", ws, err)
	}
	if n, err := c.Queues().SetAsideNeverQueued(ctx, rec); err != nil || n != 0 {
		t.Fatalf("set aside before the ledger saw the items: %d (%v), want 0", n, err)
	}

	bustest.Run(t, func(ctx context.Context) error {
		return c.Queues().KeepLedger(ctx, func(context.Context, string) (bus.Placement, error) {
			return bus.Placement{Enter: true}, nil // the job has finished
		})
	})
	bustest.Eventually(t, 10*time.Second, "the results counted", func() bool {
		ws, err := c.JobWork(ctx, rec)
		return err == nil && ws.Results == 2 && ws.NeverQueued == 0
	})
	if n, err := c.Queues().SetAsideNeverQueued(ctx, rec); err != nil || n != 0 {
		t.Errorf("set aside once entered: %d (%v), want 0", n, err)
	}
	if q, err := c.Queues().QueuedWork(ctx); err != nil || q.Subjects["pace.work.late"] != 2 {
		t.Errorf("items of the finished job on the work stream: %v (%v), want both, for the stray sweep", q.Subjects, err)
	}
}
