package main

import (
	"context"
	"strings"
	"testing"

	"github.com/pace-platform/pace/internal/execpool"
	"github.com/pace-platform/pace/schemas"
)

// TestItemCommandSeesNoCredentials: an item's command gets its job and item
// id, and none of the credentials its worker connects with.
func TestItemCommandSeesNoCredentials(t *testing.T) {
	t.Setenv("PACE_NATS_PASSWORD", "s3cr3t-password")
	t.Setenv("PACE_NATS_CREDS", "/s3cr3t/nats.creds")
	t.Setenv("PACE_TOKEN", "s3cr3t-token")
	out, err := execpool.NewPerItem("env", cleanEnv(), nil).Handle(context.Background(), &schemas.WorkItem{Job: "j", ID: "i1", Payload: ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PACE_JOB=j", "PACE_ITEM_ID=i1", "PATH="} {
		if !strings.Contains(out, want) {
			t.Errorf("the command's environment lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("a worker credential reached the item's command:\n%s", out)
	}
}
