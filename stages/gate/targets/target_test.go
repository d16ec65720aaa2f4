package targets_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// OpenTargets: a request goes to the target its job names; a new term
// restores the workers of the targets whose workers died with the last
// leader, before their loops start, and of no other; an opener's failure
// names its target.
func TestOpenTargetsRoutesByNameAndRestoresOnlyChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	for id, a := range map[string]struct {
		name     string
		replicas int
	}{"here": {"", 2}, "there": {schemas.KubernetesActuator, 3}} {
		if _, err := c.Jobs().Update(ctx, id, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
			return &schemas.JobRecord{ID: id, State: schemas.Ongoing, Replicas: a.replicas,
				Spec: schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"},
					Actuator: schemas.ActuatorSpec{Name: a.name}}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	children, remote := &countRuntime{}, &countRuntime{}
	looping := make(chan struct{})
	openers := map[string]targets.Opener{
		schemas.LocalActuator: func(env targets.Env) (targets.Target, error) {
			if env.Bus != c || env.Output == nil || env.Exited == nil || env.Log == nil {
				t.Errorf("target environment %+v lacks a part", env)
			}
			loop := func(ctx context.Context) error { close(looping); <-ctx.Done(); return nil }
			return targets.Target{Runtime: children, Restore: true, Loops: []func(context.Context) error{loop}}, nil
		},
		schemas.KubernetesActuator: func(targets.Env) (targets.Target, error) {
			return targets.Target{Runtime: remote}, nil
		},
	}
	exec, run, err := targets.Open(c, openers)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(rctx) }()
	select {
	case <-looping:
	case <-time.After(bustest.MinWait):
		t.Fatal("the local target's loop never ran")
	}
	if !slices.Equal(children.scales, []int{2}) || len(remote.scales) != 0 {
		t.Errorf("restored: local %v, kubernetes %v; want local [2] only", children.scales, remote.scales)
	}
	if _, err := exec.Execute(ctx, &schemas.KubeRequest{ID: "r", Job: "there", Verb: "patch", Subresource: "scale",
		Replicas: 5, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(remote.scales, []int{5}) || len(children.scales) != 1 {
		t.Errorf("after a request for the kubernetes job: local %v, kubernetes %v", children.scales, remote.scales)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run = %v after its context ended", err)
	}

	_, _, err = targets.Open(c, map[string]targets.Opener{"broken": func(targets.Env) (targets.Target, error) {
		return targets.Target{}, errors.New("no cluster")
	}})
	if err == nil || !strings.Contains(err.Error(), "broken actuator: no cluster") {
		t.Errorf("a failing opener: %v, want its name and cause", err)
	}
}
