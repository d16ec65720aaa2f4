package bus_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
)

// The client reads its times from the clock it is given: a pushed item is
// stamped with it.
func TestClientReadsItsClock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := bustest.Client(t, bustest.Server(t), bus.WithClock(clocktesting.NewFakeClock(at)))
	items := bus.Items("a")
	if err := c.PushItems(ctx, "clocked", items); err != nil {
		t.Fatal(err)
	}
	if !items[0].CreatedAt.Equal(at) {
		t.Errorf("item created at %v, want the client's clock's %v", items[0].CreatedAt, at)
	}
}
