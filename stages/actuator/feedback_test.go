package actuator_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
	"github.com/pace-platform/pace/stages/gate"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// lockedRuntime records scales, safe for the gate's concurrent requests.
type lockedRuntime struct {
	mu     sync.Mutex
	scales []int // guarded by mu
}

func (r *lockedRuntime) Scale(_ context.Context, _ *schemas.JobRecord, n int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scales = append(r.scales, n)
	return n, nil
}

func (r *lockedRuntime) Terminate(context.Context, *schemas.JobRecord) error { return nil }

// received collects the messages of a core NATS subscription.
type received struct {
	mu   sync.Mutex
	msgs []*nats.Msg // guarded by mu
}

func subscribe(t *testing.T, c *bus.Client, subject string) *received {
	t.Helper()
	r := &received{}
	sub, err := c.Conn().Subscribe(subject, func(m *nats.Msg) {
		r.mu.Lock()
		r.msgs = append(r.msgs, m)
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

// requests decodes the kube requests received so far.
func (r *received) requests(t *testing.T) []schemas.KubeRequest {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]schemas.KubeRequest, 0, len(r.msgs))
	for _, m := range r.msgs {
		req, err := bus.Decode[schemas.KubeRequest](m.Data, m.Header)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *req)
	}
	return out
}

func (r *received) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// TestHoldAtZeroSendsOneRequest is the regression test of issue 19's
// feedback loop: a streaming job with replicas {min 0, max 2, initial 0}
// whose controller keeps deciding 0 made one scale request per decision,
// each executed and announced by a scaled event, which the collector
// sampled and the controller decided on again, about 250 times a second.
// Through the actuator, the APF gate and the executor on a real bus, twenty
// "hold 0" decisions now make one request and no scaled event (the record
// already says 0); a later change still makes its request and its event.
func TestHoldAtZeroSendsOneRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	c := bustest.Client(t, bustest.Server(t))
	const job = "idle"
	requests := subscribe(t, c, c.Prefix().KubeRequests())
	scaled := subscribe(t, c, c.Prefix().Jobs(job, schemas.EventScaled))

	rt := &lockedRuntime{}
	runGate(t, c, rt, log)
	// The actuator starts before the job exists, so that its reconcile at
	// start (which asks for a job's initial replicas, at least 1) stays out.
	st := newActuator(t, c, actuator.WithLogger(log))
	bustest.Run(t, st.Run)
	bustest.Eventually(t, 60*time.Second, "the actuator's decision consumer", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamDecisions), "pace-actuator")
		return err == nil
	})
	if _, err := c.DeclareJob(ctx, job, schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"},
		Replicas: schemas.Replicas{Min: 0, Max: 2, Initial: 0}}); err != nil {
		t.Fatal(err)
	}

	at := time.Now()
	decide := func(i, n int, reason string) {
		bustest.Publish(t, c, c.Prefix().Decisions(job), &schemas.Decision{Job: job, At: at.Add(time.Duration(i) * time.Millisecond),
			Replicas: n, Current: 0, Controller: "deadline", Reason: reason})
	}
	const holds = 20
	for i := range holds {
		decide(i, 0, "streaming, no throughput measured yet: hold: 0")
	}
	// The actuator handles a job's decisions in order: once the request of
	// this change is out, every hold before it has been handled.
	decide(holds, 1, "scale up: 1")
	bustest.Eventually(t, 60*time.Second, "the request for 1 replica", func() bool {
		reqs := requests.requests(t)
		return len(reqs) > 0 && reqs[len(reqs)-1].Replicas == 1
	})
	bustest.Eventually(t, 60*time.Second, "the scaled event of the change to 1", func() bool { return scaled.len() > 0 })

	var got []int
	for _, req := range requests.requests(t) {
		got = append(got, req.Replicas)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("requested replicas %v, want [0 1]: one request for %d holds at 0, one for the change", got, holds)
	}
	scaled.mu.Lock()
	defer scaled.mu.Unlock()
	for _, m := range scaled.msgs {
		ev, err := bus.Decode[schemas.JobEvent](m.Data, m.Header)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Replicas != 1 {
			t.Errorf("scaled event to %d replicas: a scale that changed nothing was announced", ev.Replicas)
		}
		if want := "workers scaled to 1: deadline: scale up: 1"; ev.Reason != want {
			t.Errorf("scaled event's reason %q, want %q: the decision that caused it", ev.Reason, want)
		}
	}
	if len(scaled.msgs) != 1 {
		t.Errorf("%d scaled events, want 1 (the change to 1)", len(scaled.msgs))
	}
}

// TestQueueOnlyJobIsNeverActuated: a job without a worker spec (a queue
// that pace push or pace worker created, served by its user's workers) gets
// no infrastructure request, whatever its decisions; a job with one does.
func TestQueueOnlyJobIsNeverActuated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	c := bustest.Client(t, bustest.Server(t))
	requests := subscribe(t, c, c.Prefix().KubeRequests())
	if _, err := c.DeclareJob(ctx, "queue", schemas.JobSpec{Mode: schemas.Streaming}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeclareJob(ctx, "served", schemas.JobSpec{Mode: schemas.Streaming, Worker: schemas.WorkerSpec{Exec: "cat"},
		Replicas: schemas.Replicas{Min: 0, Max: 4, Initial: 0}}); err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, newActuator(t, c, actuator.WithLogger(log)).Run) // its reconcile skips the queue too
	bustest.Eventually(t, 60*time.Second, "the actuator's decision consumer", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamDecisions), "pace-actuator")
		return err == nil
	})
	now := time.Now()
	bustest.Publish(t, c, c.Prefix().Decisions("queue"), &schemas.Decision{Job: "queue", At: now, Replicas: 3, Reason: "scale up: 3"})
	// Decisions are handled in order: once the served job's request is out,
	// the queue's decision, published before, has been handled.
	bustest.Publish(t, c, c.Prefix().Decisions("served"), &schemas.Decision{Job: "served", At: now, Replicas: 2, Reason: "scale up: 2"})
	bustest.Eventually(t, 60*time.Second, "the served job's request", func() bool {
		for _, req := range requests.requests(t) {
			if req.Job == "served" && req.Replicas == 2 {
				return true
			}
		}
		return false
	})
	for _, req := range requests.requests(t) {
		if req.Job == "queue" {
			t.Errorf("the queue-only job got a request: %s replicas %d", req.Verb, req.Replicas)
		}
	}
}

// runGate runs, until the test ends, an APF gate with kube's default
// configuration whose executor applies admitted requests with rt as the
// local runtime.
func runGate(t *testing.T, c *bus.Client, rt targets.Runtime, log *slog.Logger) {
	t.Helper()
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, g.Run)
	exec := targets.NewExecutor(c, map[string]targets.Runtime{schemas.LocalActuator: rt}, targets.WithLogger(log))
	gs, err := gate.New(gate.Deps{Bus: c, Gate: g, Actuator: exec}, gate.Config{}, gate.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, gs.Run)
}
