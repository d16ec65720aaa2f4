package bus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

func TestLeaserHoldsItemsUntilCompletedOrReleased(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	if _, err := c.DeclareJob(ctx, "lj", schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
		t.Fatal(err)
	}
	// A message that is not an item is dead-lettered on the way to the first item.
	if _, err := c.JetStream().Publish(ctx, c.Prefix().Work("lj"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if err := c.PushItems(ctx, "lj", bus.Items("one", "two")); err != nil {
		t.Fatal(err)
	}
	l, err := c.Leaser(ctx, "lj")
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.Next(ctx, 5*time.Second)
	if err != nil || first == nil || first.Item.Payload != "one" {
		t.Fatalf("Next: %+v, %v; want item one", first, err)
	}
	if n, err := l.Remaining(ctx); err != nil || n != 2 {
		t.Fatalf("Remaining: %d, %v; want 2 (one leased, one queued)", n, err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	// Released, "one" comes back: of its two leases, only the first to
	// complete stores a result.
	byPayload := map[string]*bus.Lease{}
	for range 2 {
		ls, err := l.Next(ctx, 5*time.Second)
		if err != nil || ls == nil {
			t.Fatalf("Next: %v, %v", ls, err)
		}
		byPayload[ls.Item.Payload] = ls
	}
	if err := byPayload["one"].Complete(ctx, "ONE"); err != nil {
		t.Fatal(err)
	}
	if err := first.Complete(ctx, "late"); !errors.Is(err, bus.ErrDuplicateResult) {
		t.Fatalf("completing the released lease: %v, want ErrDuplicateResult", err)
	}
	if err := byPayload["two"].Complete(ctx, "TWO"); err != nil {
		t.Fatal(err)
	}
	results, err := c.Outputs().StoredResults(ctx, "lj")
	if err != nil || len(results) != 2 {
		t.Fatalf("results %v, %v; want two", results, err)
	}
	dead, err := c.Letters().Stored(ctx, "lj")
	if err != nil || len(dead) != 1 || dead[0].Reason != schemas.Malformed {
		t.Fatalf("dead letters %v, %v; want the unreadable message", dead, err)
	}
	bustest.Eventually(t, 5*time.Second, "nothing remains", func() bool {
		n, err := l.Remaining(ctx)
		return err == nil && n == 0
	})
}
