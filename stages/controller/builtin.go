package controller

import (
	"maps"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/deadline"
	"github.com/pace-platform/pace/stages/controller/plugin/hpa"
	"github.com/pace-platform/pace/stages/controller/plugin/pid"
	"github.com/pace-platform/pace/stages/controller/plugin/threshold"
)

// DefaultName is the controller of a native job spec that names none.
const DefaultName = deadline.Name

// builtin lists the controllers compiled into Pace.
var builtin = plugin.Registry{
	threshold.Name: threshold.New, // Asperathos "default"
	pid.Name:       pid.New,       // Asperathos "pid"
	deadline.Name:  deadline.New,  // Pace's own
	hpa.Name:       hpa.New,       // KEDA/HPA-style baseline
}

// Builtin returns a copy of the built-in registry, which callers may extend.
func Builtin() plugin.Registry { return maps.Clone(builtin) }

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
