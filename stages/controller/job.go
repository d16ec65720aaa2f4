package controller

import (
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Job is what a controller knows of the job rec (its start is zero when not
// started yet: an absolute deadline then counts from now).
func Job(name string, rec *schemas.JobRecord) plugin.Job {
	s, start := rec.Spec, rec.StartedAt
	j := plugin.Job{Name: name, Min: s.Replicas.Min, Max: s.Replicas.Max, Initial: s.Replicas.Initial}
	if p := rec.Prediction; p != nil && p.Basis != schemas.BasisNone && p.ItemTime > 0 {
		j.ItemTime, j.Startup, j.Basis, j.Samples = p.ItemTime.D(), p.Startup.D(), p.Basis, p.Samples
	}
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
