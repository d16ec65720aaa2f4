package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// A stream's handle is looked up once, and goes on reading the stream as it
// is, even after the stream was deleted and provisioned again.
func TestStreamHandleOutlivesTheStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	st, err := c.Stream(ctx, schemas.StreamDecisions)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Stream(ctx, schemas.StreamDecisions)
	if err != nil {
		t.Fatal(err)
	}
	if again != st {
		t.Error("a second Stream looked the stream up again")
	}

	bustest.Publish(t, c, c.Prefix().Decisions("j"), decision())
	if err := c.JetStream().DeleteStream(ctx, c.Prefix().Stream(schemas.StreamDecisions)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Info(ctx); err == nil {
		t.Error("Info read a deleted stream")
	}
	if err := c.Provision(ctx, bus.Limits{}); err != nil {
		t.Fatal(err)
	}
	bustest.Publish(t, c, c.Prefix().Decisions("j"), decision())
	bustest.Publish(t, c, c.Prefix().Decisions("j"), decision())
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("the handle reads %d messages on the stream provisioned again, want 2", info.State.Msgs)
	}
	if _, err := c.Stream(ctx, schemas.Stream("NOPE")); err == nil {
		t.Error("a stream that does not exist has a handle")
	}
}

func decision() *schemas.Decision {
	return &schemas.Decision{Job: "j", At: time.Now(), Replicas: 1, Reason: "test"}
}
