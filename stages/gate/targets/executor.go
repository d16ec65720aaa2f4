package targets

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Runtime runs the workers of jobs on one target (see Target).
type Runtime interface {
	// Scale sets the job's worker count and returns it.
	Scale(ctx context.Context, rec *schemas.JobRecord, replicas int) (int, error)
	// Terminate removes every worker of the job at once.
	Terminate(ctx context.Context, rec *schemas.JobRecord) error
}

// Executor runs admitted requests on the runtime each job's spec names
// (actuator.name, "local" when empty). It implements the gate's Actuator.
type Executor struct {
	c        *bus.Client
	runtimes map[string]Runtime
	log      *slog.Logger
	clk      clock.PassiveClock

	mu   sync.Mutex
	jobs map[string]*jobOrder // guarded by mu
}

// jobOrder serializes a job's requests: the gate runs admitted requests
// concurrently, and a request older than the last one applied is stale.
type jobOrder struct {
	sync.Mutex
	last time.Time // At of the last request applied; guarded by the job's lock
}

func (e *Executor) order(job string) *jobOrder {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.jobs[job]
	if o == nil {
		o = &jobOrder{}
		e.jobs[job] = o
	}
	return o
}

// NewExecutor returns an executor of requests on runtimes, keyed by actuator name.
func NewExecutor(c *bus.Client, runtimes map[string]Runtime, opts ...Option) *Executor {
	o := apply("actuator", opts)
	return &Executor{c: c, runtimes: runtimes, log: o.log, clk: o.clk, jobs: map[string]*jobOrder{}}
}

// Execute scales (verb patch, subresource scale) or deletes (verb delete) a
// job's workers, then reports the replica count and, in the outcome's
// reason, the attempts the runtime retried (see NoteRetry).
func (e *Executor) Execute(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
	if req.Job == "" {
		return nil, fmt.Errorf("request %s names no job", req.ID)
	}
	o := e.order(req.Job)
	o.Lock()
	defer o.Unlock()
	if req.At.Before(o.last) {
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Rejected,
			Reason: "superseded by a newer request", At: e.clk.Now()}, nil
	}
	// Read under the job's lock, so that its replicas are those the last
	// request recorded.
	rec, err := e.c.Jobs().Status(ctx, req.Job)
	if err != nil {
		return nil, err
	}
	name := targetOf(rec)
	rt, ok := e.runtimes[name]
	if !ok {
		names := make([]string, 0, len(e.runtimes))
		for n := range e.runtimes {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("job %s uses the %s actuator; this Pace runs %s", req.Job, name, strings.Join(names, ", "))
	}
	o.last = req.At
	ctx, retries := WithRetries(ctx)
	replicas := 0
	switch {
	case req.Verb == "delete":
		err = rt.Terminate(ctx, rec)
	case req.Subresource == "scale":
		replicas, err = rt.Scale(ctx, rec, req.Replicas)
	default:
		return nil, fmt.Errorf("request %s: unsupported %s on %s/%s", req.ID, req.Verb, req.Resource, req.Subresource)
	}
	if err != nil {
		if retries.Total() > 0 {
			return nil, fmt.Errorf("%w (after %s)", err, retries)
		}
		return nil, err
	}
	if !rec.State.Final() && req.Verb != "delete" {
		// Only a change is recorded: a scaled event is news to its readers
		// (the collector samples on it, the manager logs it), and a scale
		// that changed nothing, such as a request repeated after a restart,
		// has none.
		if replicas != rec.Replicas {
			if err := e.recordScale(ctx, req, replicas, rec.State); err != nil {
				e.log.Warn("scaled event not recorded", "job", req.Job, "err", err)
			}
		}
	}
	return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, Replicas: replicas,
		Reason: retries.String(), At: e.clk.Now()}, nil
}

// recordScale records a scaled event, saying which request's reason caused
// it, as the manager records its own (bus.Jobs.RecordEvent).
func (e *Executor) recordScale(ctx context.Context, req *schemas.KubeRequest, replicas int, state schemas.JobState) error {
	job := req.Job
	reason := fmt.Sprintf("workers scaled to %d", replicas)
	if req.Reason != "" {
		reason += ": " + req.Reason
	}
	ev := &schemas.JobEvent{Job: job, Type: schemas.EventScaled, State: state, Replicas: replicas,
		At: e.clk.Now(), Reason: reason}
	_, err := e.c.Jobs().RecordEvent(ctx, ev)
	return err
}

// Restore starts again the workers of the running jobs on the targets
// named, as their records say, when the gate's leader starts: the workers
// of targets whose workers are the leader's children died with the last
// one. Failures are logged; the job's next decision asks again.
func (e *Executor) Restore(ctx context.Context, targets ...string) {
	if len(targets) == 0 {
		return
	}
	jobs, err := e.c.Jobs().List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("workers not restored", "err", err)
		}
		return
	}
	for _, rec := range jobs {
		if rec.State != schemas.Ongoing || rec.Replicas == 0 || !slices.Contains(targets, targetOf(rec)) {
			continue
		}
		// No time: the request is older than any the actuator sends.
		req := &schemas.KubeRequest{ID: "restore-" + rec.ID, Job: rec.ID, Verb: "patch", Subresource: "scale", Replicas: rec.Replicas}
		if _, err := e.Execute(ctx, req); err != nil {
			e.log.Warn(targetOf(rec)+" workers not restored", "job", rec.ID, "err", err)
			continue
		}
		e.log.Info(targetOf(rec)+" workers restored", "job", rec.ID, "replicas", rec.Replicas)
	}
}

// targetOf is the target a job's workers run on.
func targetOf(rec *schemas.JobRecord) string {
	if rec.Spec.Actuator.Name == "" {
		return schemas.LocalActuator
	}
	return rec.Spec.Actuator.Name
}
