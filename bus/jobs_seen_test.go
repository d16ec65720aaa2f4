package bus_test

import (
	"errors"
	"testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestCallersSeeTheirJobsOnly: a caller's listing holds the jobs its view
// accepts, and a job it does not see is not found, as an unknown one.
func TestCallersSeeTheirJobsOnly(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	for job, owner := range map[string]string{"a1": "alice", "a2": "alice", "b1": "bob"} {
		if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	alice := func(owner string) bool { return owner == "alice" }
	recs, err := c.Jobs().ListSeen(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || ids[0] == "b1" || ids[1] == "b1" {
		t.Errorf("alice's listing = %v, want a1 and a2", ids)
	}
	if rec, err := c.Jobs().StatusSeen(ctx, "a1", alice); err != nil || rec.ID != "a1" {
		t.Errorf("alice's a1 = %v, %v; want it", rec, err)
	}
	for _, job := range []string{"b1", "nothing"} {
		if _, err := c.Jobs().StatusSeen(ctx, job, alice); !errors.Is(err, bus.ErrJobNotFound) {
			t.Errorf("alice's %s: err = %v, want ErrJobNotFound", job, err)
		}
	}
}
