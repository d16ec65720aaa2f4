package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

func TestJob(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{At: start.Add(90 * time.Second)},
		Replicas: schemas.Replicas{Min: 1, Max: 5, Initial: 2}}
	want := plugin.Job{Name: "j", Expected: 90 * time.Second, Min: 1, Max: 5, Initial: 2}
	if diff := cmp.Diff(want, Job("j", spec, start)); diff != "" {
		t.Errorf("Job (-want +got):\n%s", diff)
	}
}
