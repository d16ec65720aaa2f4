package actuator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator/local"
)

// Runtime runs the workers of jobs: the local process runtime or Kubernetes.
type Runtime interface {
	// Scale sets the job's worker count and returns it.
	Scale(ctx context.Context, rec *schemas.JobRecord, replicas int) (int, error)
	// Terminate removes every worker of the job at once.
	Terminate(ctx context.Context, rec *schemas.JobRecord) error
}

// Local adapts the local process runtime to Runtime.
func Local(rt *local.Runtime) Runtime { return localRuntime{rt} }

type localRuntime struct{ rt *local.Runtime }

func (l localRuntime) Scale(ctx context.Context, rec *schemas.JobRecord, replicas int) (int, error) {
	w := rec.Spec.Worker
	limits, err := localLimits(w.Resources)
	if err != nil {
		return 0, err
	}
	return l.rt.Scale(ctx, local.Worker{Job: rec.ID, Exec: w.Exec, ExecMode: w.ExecMode, Command: w.Command, Env: w.Env,
		Metered: rec.Spec.Cost != nil, Redis: w.SpeaksRedis(), Limits: limits}, replicas)
}

// localLimits are the cpu and memory of a job's worker.resources.limits,
// which bound its local workers together when they are sandboxed.
func localLimits(r *schemas.Resources) (local.Limits, error) {
	var l local.Limits
	if r == nil {
		return l, nil
	}
	for name, dst := range map[string]func(resource.Quantity){
		"cpu":    func(q resource.Quantity) { l.MilliCPU = q.MilliValue() },
		"memory": func(q resource.Quantity) { l.MemoryBytes = q.Value() },
	} {
		v, ok := r.Limits[name]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return l, fmt.Errorf("worker.resources.limits.%s: %q: %w", name, v, err)
		}
		dst(q)
	}
	return l, nil
}

func (l localRuntime) Terminate(_ context.Context, rec *schemas.JobRecord) error {
	l.rt.Terminate(rec.ID)
	return nil
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
	rec, err := e.c.Status(ctx, req.Job)
	if err != nil {
		return nil, err
	}
	name := rec.Spec.Actuator.Name
	if name == "" {
		name = schemas.LocalActuator
	}
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
// it, as the manager records its own (bus.Client.RecordJobEvent).
func (e *Executor) recordScale(ctx context.Context, req *schemas.KubeRequest, replicas int, state schemas.JobState) error {
	job := req.Job
	reason := fmt.Sprintf("workers scaled to %d", replicas)
	if req.Reason != "" {
		reason += ": " + req.Reason
	}
	ev := &schemas.JobEvent{Job: job, Type: schemas.EventScaled, State: state, Replicas: replicas,
		At: e.clk.Now(), Reason: reason}
	_, err := e.c.RecordJobEvent(ctx, ev)
	return err
}

// RestoreLocal starts again the local workers of the running jobs, as their
// records say, when the gate's leader starts: the processes of the one
// before died with it. Failures are logged; the job's next decision asks
// again.
func (e *Executor) RestoreLocal(ctx context.Context) {
	jobs, err := e.c.Jobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("local workers not restored", "err", err)
		}
		return
	}
	for _, rec := range jobs {
		if rec.State != schemas.Ongoing || rec.Replicas == 0 ||
			rec.Spec.Actuator.Name != "" && rec.Spec.Actuator.Name != schemas.LocalActuator {
			continue
		}
		// No time: the request is older than any the actuator sends.
		req := &schemas.KubeRequest{ID: "restore-" + rec.ID, Job: rec.ID, Verb: "patch", Subresource: "scale", Replicas: rec.Replicas}
		if _, err := e.Execute(ctx, req); err != nil {
			e.log.Warn("local workers not restored", "job", rec.ID, "err", err)
			continue
		}
		e.log.Info("local workers restored", "job", rec.ID, "replicas", rec.Replicas)
	}
}
