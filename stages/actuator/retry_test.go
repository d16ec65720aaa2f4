package actuator_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
)

// failOnceRuntime fails its first scale for good, then applies them.
type failOnceRuntime struct {
	mu     sync.Mutex
	calls  int // guarded by mu
	scaled int // guarded by mu
}

func (r *failOnceRuntime) Scale(_ context.Context, _ *schemas.JobRecord, n int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls++; r.calls == 1 {
		return 0, errors.New("injected: retries exhausted")
	}
	r.scaled = n
	return n, nil
}

func (r *failOnceRuntime) Terminate(context.Context, *schemas.JobRecord) error { return nil }

func (r *failOnceRuntime) state() (calls, scaled int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.scaled
}

// TestFailedRequestIsAskedAgain: after a request fails, the actuator asks
// again for the same count by itself, with no new decision (an unchanged
// decision comes only once per heartbeat).
func TestFailedRequestIsAskedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	c := bustest.Client(t, bustest.Server(t))
	const job = "j"
	outcomes, err := c.Conn().SubscribeSync(c.Prefix().KubeOutcomes())
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := c.Conn().SubscribeSync(c.Prefix().Jobs(job, schemas.EventScaled))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"},
		Replicas: schemas.Replicas{Initial: 3}}); err != nil {
		t.Fatal(err)
	}
	rt := &failOnceRuntime{}
	runGate(t, c, rt, log)
	bustest.Run(t, newActuator(t, c, actuator.WithLogger(log)).Run) // its reconcile asks for the initial 3, which fails

	// Waits are on the events themselves, with bounds generous enough for a
	// loaded machine: the test's speed is the bus's.
	const wait = 90 * time.Second
	deadline := time.Now().Add(wait)
	for {
		m, err := outcomes.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("no failed outcome within %s: %v", wait, err)
		}
		out, err := bus.Decode[schemas.KubeOutcome](m.Data, m.Header)
		if err != nil {
			t.Fatal(err)
		}
		if out.Job == job && out.Status == schemas.Failure {
			break
		}
	}
	if calls, _ := rt.state(); calls != 1 {
		t.Fatalf("%d runtime calls before the failed outcome, want 1", calls)
	}
	// No decision is published: the stage asks again a second later.
	m, err := scaled.NextMsg(wait)
	if err != nil {
		t.Fatalf("no scaled event within %s of the failed outcome: %v", wait, err)
	}
	ev, err := bus.Decode[schemas.JobEvent](m.Data, m.Header)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Replicas != 3 {
		t.Fatalf("scaled to %d, want 3", ev.Replicas)
	}
	if calls, n := rt.state(); calls != 2 || n != 3 {
		t.Errorf("runtime: %d calls, scaled to %d; want 2 calls (the failure, the retry) and 3", calls, n)
	}
}
