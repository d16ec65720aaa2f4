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
	rec := &schemas.JobRecord{StartedAt: start, Spec: schemas.JobSpec{Mode: schemas.Batch,
		Deadline: schemas.Deadline{At: start.Add(90 * time.Second)}, Replicas: schemas.Replicas{Min: 1, Max: 5, Initial: 2}}}
	want := plugin.Job{Name: "j", Expected: 90 * time.Second, Min: 1, Max: 5, Initial: 2}
	if diff := cmp.Diff(want, Job("j", rec)); diff != "" {
		t.Errorf("Job (-want +got):\n%s", diff)
	}

	// A forecast from earlier jobs of the same program reaches the controller;
	// an empty one does not.
	rec.Prediction = &schemas.Prediction{Basis: schemas.BasisHistory,
		ItemTime: schemas.Duration(300 * time.Millisecond), Startup: schemas.Duration(4 * time.Second), Samples: 640}
	want.ItemTime, want.Startup, want.Basis, want.Samples = 300*time.Millisecond, 4*time.Second, schemas.BasisHistory, 640
	if diff := cmp.Diff(want, Job("j", rec)); diff != "" {
		t.Errorf("Job with a forecast (-want +got):\n%s", diff)
	}
	rec.Prediction = &schemas.Prediction{Basis: schemas.BasisNone}
	want.ItemTime, want.Startup, want.Basis, want.Samples = 0, 0, "", 0
	if diff := cmp.Diff(want, Job("j", rec)); diff != "" {
		t.Errorf("Job with basis none (-want +got):\n%s", diff)
	}
}
