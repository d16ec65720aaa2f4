package controller

import (
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Job is what a controller knows of a job with spec s started at start
// (zero when not started yet: an absolute deadline then counts from now).
func Job(name string, s schemas.JobSpec, start time.Time) plugin.Job {
	j := plugin.Job{Name: name, Min: s.Replicas.Min, Max: s.Replicas.Max, Initial: s.Replicas.Initial}
	if s.Mode != schemas.Streaming {
		switch {
		case s.Deadline.After > 0:
			j.Expected = s.Deadline.After.D()
		case !s.Deadline.At.IsZero() && !start.IsZero():
			j.Expected = s.Deadline.At.Sub(start)
		}
	}
	return j
}
