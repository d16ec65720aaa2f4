package local

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// Opener returns the opener of the local target: worker processes on this
// host, made by New with cfg, whose output lines and exits go to the
// gate's (cfg.Output and cfg.Exited are the target environment's). It
// fails where cfg asks for a sandbox this machine cannot give.
func Opener(cfg Config) targets.Opener {
	return func(env targets.Env) (targets.Target, error) {
		cfg.Output, cfg.Exited = env.Output.Line, env.Exited
		rt, err := New(cfg, WithLogger(env.Log))
		if errors.Is(err, ErrNoSandbox) {
			return targets.Target{}, fmt.Errorf("%w\nlocal workers cannot be sandboxed on this machine: run them as Pace's own user with --local-exec-unsandboxed, or none with --actuator none", err)
		}
		if err != nil {
			return targets.Target{}, err
		}
		if cfg.Sandbox == nil {
			env.Log.Warn("local workers run unsandboxed, as Pace's own user (--local-exec-unsandboxed): they can read what Pace can")
		} else {
			env.Log.Info("local workers are sandboxed", "isolation", rt.Isolation())
		}
		return AsTarget(rt), nil
	}
}

// AsTarget is rt as a target: its workers are the process's children, so
// a new gate leader restores them, and it meters the jobs with a cost.
func AsTarget(rt *Runtime) targets.Target {
	return targets.Target{Runtime: jobs{rt}, Meter: meter(rt), Loops: []func(context.Context) error{rt.Run}, Restore: true}
}

// jobs runs jobs' workers on the runtime.
type jobs struct{ rt *Runtime }

func (j jobs) Scale(ctx context.Context, rec *schemas.JobRecord, replicas int) (int, error) {
	w := rec.Spec.Worker
	limits, err := limitsOf(w.Resources)
	if err != nil {
		return 0, err
	}
	return j.rt.Scale(ctx, Worker{Job: rec.ID, Exec: w.Exec, ExecMode: w.ExecMode, Command: w.Command, Env: w.Env,
		Metered: rec.Spec.Cost != nil, Redis: w.SpeaksRedis(), Limits: limits}, replicas)
}

func (j jobs) Terminate(_ context.Context, rec *schemas.JobRecord) error {
	j.rt.Terminate(rec.ID)
	return nil
}

// limitsOf are the cpu and memory of a job's worker.resources.limits,
// which bound its local workers together when they are sandboxed.
func limitsOf(r *schemas.Resources) (Limits, error) {
	var l Limits
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

// meter measures the runtime's metered processes.
func meter(rt *Runtime) targets.Meter {
	return func(context.Context) []targets.Use {
		var out []targets.Use
		for _, u := range rt.Measure() {
			out = append(out, targets.Use{Job: u.Job, CPU: u.CPUSeconds, Cumulative: true, MemoryBytes: u.MemoryBytes,
				Replicas: u.Replicas, Source: "local"})
		}
		return out
	}
}
