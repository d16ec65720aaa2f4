package collector

import (
	"context"
	"fmt"
	"testing"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestCountSubjectsAgrees checks the fallback used past the per-stream
// consumer limit counts the same results as a counting consumer.
func TestCountSubjectsAgrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	for i := range 7 {
		if err := c.PublishResult(ctx, &schemas.Result{Job: "j", ItemID: fmt.Sprintf("i%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PublishResult(ctx, &schemas.Result{Job: "other", ItemID: "x"}); err != nil {
		t.Fatal(err)
	}
	col, err := New(Deps{Bus: c}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	byConsumer, err := col.count(ctx, schemas.StreamResults, "j", c.Prefix().JobResults("j"))
	if err != nil {
		t.Fatal(err)
	}
	bySubjects, err := col.countSubjects(ctx, schemas.StreamResults, c.Prefix().JobResults("j"))
	if err != nil {
		t.Fatal(err)
	}
	if byConsumer != 7 || bySubjects != 7 {
		t.Errorf("results counted by consumer = %d, by subjects = %d, want 7 and 7", byConsumer, bySubjects)
	}
}
