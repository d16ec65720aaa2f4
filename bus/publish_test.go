package bus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestPublishStoresOncePerID: Publish stores a message with Pace's headers,
// read back by its schema; a retry with the same id is stored once, and a
// message that fails its validation is refused before it is sent.
func TestPublishStoresOncePerID(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := bustest.Client(t, bustest.Server(t))
	d := &schemas.Decision{Job: "j", At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Replicas: 3, Reason: "test"}
	for range 2 {
		if err := c.Publish(ctx, c.Prefix().Decisions("j"), d, "j/1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Publish(ctx, c.Prefix().Decisions("j"), &schemas.Decision{Job: "j", At: d.At.Add(time.Second), Replicas: 4, Reason: "test"}, ""); err != nil {
		t.Fatal(err)
	}
	var got []int
	for dec, err := range c.Outputs().Decisions(ctx, "j", false) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, dec.Replicas)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Errorf("decisions stored %v, want [3 4]: the retried one once", got)
	}
	if err := c.Publish(ctx, c.Prefix().Decisions("j"), &schemas.Decision{Job: "j"}, ""); !errors.Is(err, bus.ErrMalformed) {
		t.Errorf("invalid decision: err = %v, want ErrMalformed", err)
	}
}
