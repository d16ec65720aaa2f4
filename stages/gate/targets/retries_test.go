package targets_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

func TestRetries(t *testing.T) {
	t.Parallel()
	targets.NoteRetry(context.Background(), "ignored") // no Retries in ctx: a no-op
	ctx, r := targets.WithRetries(context.Background())
	if got := r.String(); got != "" {
		t.Errorf("no retries: String() = %q, want empty", got)
	}
	targets.NoteRetry(ctx, "server error")
	if got, want := r.String(), "1 retry (server error 1)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	targets.NoteRetry(ctx, "conflict")
	targets.NoteRetry(ctx, "server error")
	if got, want := r.String(), "3 retries (conflict 1, server error 2)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := r.Total(); got != 3 {
		t.Errorf("Total() = %d, want 3", got)
	}
}

// flakyRuntime fails each call's first attempts, as a runtime retrying a
// flaky API would, noting each retry.
type flakyRuntime struct{ failures int }

func (r flakyRuntime) attempt(ctx context.Context) error {
	for range r.failures {
		targets.NoteRetry(ctx, "server error")
	}
	return nil
}

func (r flakyRuntime) Scale(ctx context.Context, _ *schemas.JobRecord, n int) (int, error) {
	return n, r.attempt(ctx)
}

func (r flakyRuntime) Terminate(ctx context.Context, _ *schemas.JobRecord) error {
	_ = r.attempt(ctx)
	return errors.New("forbidden")
}

func TestExecutorReportsRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	if _, err := c.DeclareJob(ctx, "j", schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"}}); err != nil {
		t.Fatal(err)
	}
	e := targets.NewExecutor(c, map[string]targets.Runtime{schemas.LocalActuator: flakyRuntime{failures: 2}})
	t0 := time.Now()
	out, err := e.Execute(ctx, &schemas.KubeRequest{ID: "a", Job: "j", Verb: "patch", Subresource: "scale", Replicas: 2, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if want := "2 retries (server error 2)"; out.Status != schemas.Applied || out.Reason != want {
		t.Errorf("outcome %s %q, want applied %q", out.Status, out.Reason, want)
	}
	_, err = e.Execute(ctx, &schemas.KubeRequest{ID: "b", Job: "j", Verb: "delete", At: t0.Add(time.Second)})
	if err == nil || !strings.Contains(err.Error(), "forbidden (after 2 retries") {
		t.Errorf("delete error = %v, want the runtime's error and its retries", err)
	}
}
