package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// Jobs decodes a record again only when it changed, and each caller gets
// a slice of its own (the records are shared, read-only): a change shows
// in the next listing, a caller filtering its slice in place changes no
// other listing, and a deleted record is gone.
func TestJobsSeesChangesNotEdits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	put := func(id string, total int) { t.Helper(); putTotal(ctx, t, c, id, total) }
	totals := func() map[string]int { t.Helper(); return listedTotals(ctx, t, c) }
	put("a", 1)
	put("b", 2)
	if got := totals(); got["a"] != 1 || got["b"] != 2 || len(got) != 2 {
		t.Fatalf("first listing %v, want a:1 b:2", got)
	}
	put("a", 10)
	if err := c.Queues().PurgeJob(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := totals(); got["a"] != 10 || len(got) != 1 {
		t.Errorf("after a change and a deletion: %v, want a:10 alone", got)
	}
	if got := totals(); got["a"] != 10 {
		t.Errorf("unchanged record listed as %v, want a:10 (a caller's edit of its slice must not stick)", got)
	}
}

// A listing of an unchanged bucket asks nothing of the server; another
// client's write shows in the listing once its watch has seen it, this
// client's own at once.
func TestJobsOfAnUnchangedBucketAskNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := bustest.Server(t)
	c, other := bustest.Client(t, srv), bustest.Client(t, srv)
	put := func(c *bus.Client, id string, total int) { t.Helper(); putTotal(ctx, t, c, id, total) }
	totals := func() map[string]int { t.Helper(); return listedTotals(ctx, t, c) }
	apiCalls := func() uint64 {
		t.Helper()
		info, err := other.JetStream().AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.API.Total
	}

	put(c, "a", 1)
	if got := totals(); got["a"] != 1 {
		t.Fatalf("first listing %v, want a:1", got)
	}
	before := apiCalls()
	for range 20 {
		totals()
	}
	if n := apiCalls() - before; n > 1 { // the count's own request
		t.Errorf("20 listings of an unchanged bucket made %d API requests, want none", n-1)
	}

	put(c, "a", 2)
	if got := totals(); got["a"] != 2 {
		t.Errorf("after its own write: %v, want a:2 at once", got)
	}
	put(other, "b", 3)
	bustest.Eventually(t, 5*time.Second, "another client's write listed", func() bool { return totals()["b"] == 3 })
}

// putTotal stores a record of an ongoing job id with total items.
func putTotal(ctx context.Context, t *testing.T, c *bus.Client, id string, total int) {
	t.Helper()
	if _, err := c.Jobs().Update(ctx, id, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
		return &schemas.JobRecord{ID: id, State: schemas.Ongoing, Total: total}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// listedTotals lists the jobs and returns their totals by id; it then
// clears its slice, as a caller editing its own may.
func listedTotals(ctx context.Context, t *testing.T, c *bus.Client) map[string]int {
	t.Helper()
	recs, err := c.Jobs().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		out[r.ID] = r.Total
	}
	clear(recs)
	return out
}
