package bus_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestStoredResultsOnClusterFromEveryServer reads a job's results from a
// client of each server of a cluster, twice each. The reader's ordered
// consumer is recreated at every fetch, on any server, and a fetch may find
// no responder before the new consumer's interest has crossed the routes:
// the read must go on, not fail.
func TestStoredResultsOnClusterFromEveryServer(t *testing.T) {
	ctx := clusterCtx(t)
	nodes := bustest.Cluster(t, 3)
	c := nodes.Client()
	const job, n = "stored", 3000
	for i := range n {
		r := &schemas.Result{Job: job, ItemID: fmt.Sprintf("%05d", i), Output: "ok"}
		if err := c.PublishResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		rc, err := bus.Connect(ctx, nodes.URL(i), bus.WithName(fmt.Sprintf("reader-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.Close(context.Background()) })
		for range 2 {
			got, err := rc.Outputs().StoredResults(ctx, job)
			if err != nil {
				t.Fatalf("reader of nats-%d: %v", i+1, err)
			}
			if len(got) != n {
				t.Fatalf("reader of nats-%d: %d results, want %d", i+1, len(got), n)
			}
		}
	}
}
