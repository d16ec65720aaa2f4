package bus_test

import (
	"testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// Jobs decodes a record again only when it changed, and each caller gets
// a slice of its own (the records are shared, read-only): a change shows
// in the next listing, a caller filtering its slice in place changes no
// other listing, and a deleted record is gone.
func TestJobsSeesChangesNotEdits(t *testing.T) {
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	put := func(id string, total int) {
		t.Helper()
		if _, err := c.UpdateJob(ctx, id, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
			return &schemas.JobRecord{ID: id, State: schemas.Ongoing, Total: total}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	totals := func() map[string]int {
		t.Helper()
		recs, err := c.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, r := range recs {
			out[r.ID] = r.Total
		}
		clear(recs) // a caller's edit of its slice
		return out
	}
	put("a", 1)
	put("b", 2)
	if got := totals(); got["a"] != 1 || got["b"] != 2 || len(got) != 2 {
		t.Fatalf("first listing %v, want a:1 b:2", got)
	}
	put("a", 10)
	if err := c.PurgeJob(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := totals(); got["a"] != 10 || len(got) != 1 {
		t.Errorf("after a change and a deletion: %v, want a:10 alone", got)
	}
	if got := totals(); got["a"] != 10 {
		t.Errorf("unchanged record listed as %v, want a:10 (a caller's edit of its slice must not stick)", got)
	}
}
