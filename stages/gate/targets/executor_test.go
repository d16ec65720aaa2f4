package targets_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// countRuntime records scales; it stands beside the real-process test.
type countRuntime struct{ scales []int }

func (r *countRuntime) Scale(_ context.Context, _ *schemas.JobRecord, n int) (int, error) {
	r.scales = append(r.scales, n)
	return n, nil
}

func (r *countRuntime) Terminate(context.Context, *schemas.JobRecord) error { return nil }

func TestExecutorSkipsStaleRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	if _, err := c.DeclareJob(ctx, "j", schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"}}); err != nil {
		t.Fatal(err)
	}
	rt := &countRuntime{}
	e := targets.NewExecutor(c, map[string]targets.Runtime{schemas.LocalActuator: rt})
	t0 := time.Now()
	newer := &schemas.KubeRequest{ID: "b", Job: "j", Verb: "patch", Subresource: "scale", Replicas: 4, At: t0.Add(time.Second)}
	older := &schemas.KubeRequest{ID: "a", Job: "j", Verb: "patch", Subresource: "scale", Replicas: 1, At: t0}
	for _, req := range []*schemas.KubeRequest{newer, older} {
		if _, err := e.Execute(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if len(rt.scales) != 1 || rt.scales[0] != 4 {
		t.Errorf("scales = %v, want only the newer request's 4", rt.scales)
	}
	rec, err := c.Jobs().Status(ctx, "j")
	if err != nil || rec.Replicas != 4 {
		t.Errorf("record replicas = %v (%v), want 4", rec, err)
	}
	if _, err := e.Execute(ctx, &schemas.KubeRequest{ID: "c", Job: "j", Verb: "get", Resource: "jobs", At: t0.Add(2 * time.Second)}); err == nil {
		t.Error("an unsupported request succeeded")
	}
}

// Restore scales the local workers of running jobs to their records'
// replicas, and leaves the others alone: jobs of another actuator, without
// replicas, or not running.
func TestExecutorRestoresLocalWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	put := func(id string, state schemas.JobState, replicas int, actuatorName string) {
		t.Helper()
		if _, err := c.Jobs().Update(ctx, id, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
			return &schemas.JobRecord{ID: id, State: state, Replicas: replicas,
				Spec: schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"},
					Actuator: schemas.ActuatorSpec{Name: actuatorName}}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("running", schemas.Ongoing, 3, "")
	put("named-local", schemas.Ongoing, 2, schemas.LocalActuator)
	put("idle", schemas.Ongoing, 0, "")
	put("done", schemas.Completed, 3, "")
	put("elsewhere", schemas.Ongoing, 5, "kubernetes")
	rt := &countRuntime{}
	e := targets.NewExecutor(c, map[string]targets.Runtime{schemas.LocalActuator: rt})
	e.Restore(ctx, schemas.LocalActuator)
	slices.Sort(rt.scales)
	if len(rt.scales) != 2 || rt.scales[0] != 2 || rt.scales[1] != 3 {
		t.Errorf("scales = %v, want [2 3] (running and named-local)", rt.scales)
	}
}
