package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

func TestBuiltin(t *testing.T) {
	reg := Builtin()
	if diff := cmp.Diff([]string{"deadline", "default", "hpa", "pid"}, reg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	job := plugin.Job{Name: "j", Expected: time.Minute, Min: 1, Max: 4, Initial: 1}
	for _, name := range reg.Names() {
		if _, err := reg.New(name, job, nil); err != nil {
			t.Errorf("New(%s) with defaults: %v", name, err)
		}
	}
	_, err := reg.New("bogus", job, nil)
	if !errors.Is(err, plugin.ErrInvalidConfig) || !strings.Contains(err.Error(), `"deadline"`) {
		t.Errorf("unknown name: err = %v, want ErrInvalidConfig listing the known names", err)
	}
	delete(reg, "pid")
	if _, ok := builtin["pid"]; !ok {
		t.Error("Builtin returned the registry itself, not a copy")
	}
}

func TestJob(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{At: start.Add(90 * time.Second)},
		Replicas: schemas.Replicas{Min: 1, Max: 5, Initial: 2}}
	want := plugin.Job{Name: "j", Expected: 90 * time.Second, Min: 1, Max: 5, Initial: 2}
	if diff := cmp.Diff(want, Job("j", spec, start)); diff != "" {
		t.Errorf("Job (-want +got):\n%s", diff)
	}
}
