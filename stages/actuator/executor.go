package actuator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator/local"
)

// Executor runs admitted requests on the local process runtime. It
// implements the gate's Actuator.
type Executor struct {
	c   *bus.Client
	rt  *local.Runtime
	log *slog.Logger
}

// NewExecutor returns an executor of requests on rt.
func NewExecutor(c *bus.Client, rt *local.Runtime, log *slog.Logger) *Executor {
	return &Executor{c: c, rt: rt, log: log.With("stage", "actuator", "runtime", "local")}
}

// Execute scales (verb patch, subresource scale) or deletes (verb delete) a
// job's workers, then reports the replica count.
func (e *Executor) Execute(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
	if req.Job == "" {
		return nil, fmt.Errorf("request %s names no job", req.ID)
	}
	rec, err := e.c.Status(ctx, req.Job)
	if err != nil {
		return nil, err
	}
	if a := rec.Spec.Actuator.Name; a != "" && a != schemas.LocalActuator {
		return nil, fmt.Errorf("job %s uses the %s actuator, not local", req.Job, a)
	}
	replicas := 0
	switch {
	case req.Verb == "delete":
		e.rt.Terminate(req.Job)
	case req.Subresource == "scale":
		w := local.Worker{Job: req.Job, Exec: rec.Spec.Worker.Exec, Command: rec.Spec.Worker.Command, Env: rec.Spec.Worker.Env}
		if replicas, err = e.rt.Scale(ctx, w, req.Replicas); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("request %s: unsupported %s on %s/%s", req.ID, req.Verb, req.Resource, req.Subresource)
	}
	if !rec.State.Final() && req.Verb != "delete" {
		e.recordScale(ctx, req.Job, replicas, rec.State)
	}
	return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, Replicas: replicas, At: time.Now()}, nil
}

// recordScale publishes a scaled event and applies it to the job record, as
// the manager does with its own events: the record follows the event stream
// (its Seq is the last event applied).
func (e *Executor) recordScale(ctx context.Context, job string, replicas int, state schemas.JobState) {
	ev := &schemas.JobEvent{Job: job, Type: schemas.EventScaled, State: state, Replicas: replicas,
		At: time.Now(), Reason: "local runtime scaled"}
	seq, err := e.c.PublishJobEvent(ctx, ev)
	if err == nil {
		_, err = e.c.UpdateJob(ctx, job, func(cur *schemas.JobRecord) (*schemas.JobRecord, error) {
			if cur == nil || seq <= cur.Seq {
				return nil, nil
			}
			next := *cur
			next.Replicas, next.Seq = replicas, seq
			return &next, nil
		})
	}
	if err != nil {
		e.log.Warn("scaled event not recorded", "job", job, "err", err)
	}
}
