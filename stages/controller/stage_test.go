package controller_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/builtin"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runStage runs a controller stage with the default config until the
// returned stop is called.
func runStage(t testing.TB, c *bus.Client) (stop func()) {
	t.Helper()
	return runStageWith(t, c, controller.Config{})
}

// runStageWith runs a controller stage with cfg and opts until the returned
// stop is called.
func runStageWith(t testing.TB, c *bus.Client, cfg controller.Config, opts ...controller.Option) (stop func()) {
	t.Helper()
	opts = append([]controller.Option{controller.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))}, opts...)
	st, err := controller.New(controller.Deps{Bus: c}, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := st.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	bustest.Eventually(t, 5*time.Second, "controller consumer", func() bool {
		_, err := c.JetStream().Consumer(ctx, c.Prefix().Stream(schemas.StreamMetrics), controller.DefaultDurable)
		return err == nil
	})
	return func() { cancel(); wg.Wait() }
}

// ongoing stores rec as an ongoing job started at t0 and subscribes to its
// decisions.
func ongoing(t *testing.T, c *bus.Client, rec *schemas.JobRecord) *nats.Subscription {
	t.Helper()
	rec.State, rec.CreatedAt, rec.StartedAt = schemas.Ongoing, t0, t0
	if _, err := c.Jobs().Update(context.Background(), rec.ID, func(*schemas.JobRecord) (*schemas.JobRecord, error) { return rec, nil }); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Conn().SubscribeSync(c.Prefix().Decisions(rec.ID))
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func publishProgress(t testing.TB, c *bus.Client, p *schemas.Progress) {
	t.Helper()
	bustest.Publish(t, c, c.Prefix().Metrics(p.Job, schemas.ProgressMetrics), p)
}

func nextDecision(t *testing.T, sub *nats.Subscription) schemas.Decision {
	t.Helper()
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no decision: %v", err)
	}
	d, err := bus.Decode[schemas.Decision](msg.Data, msg.Header)
	if err != nil {
		t.Fatal(err)
	}
	return *d
}

// TestStageDecidesAndResumes runs Asperathos' default scheduler (triggers 0,
// actuation_size 2) through the stage on an embedded server: a late job
// scales up by 2 per fresh sample, a stale sample is not acted on, and a
// restarted stage resumes from the state kept in the KV bucket.
func TestStageDecidesAndResumes(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	const job = "squares"
	spec := schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{After: schemas.Duration(100 * time.Second)},
		Replicas:   schemas.Replicas{Min: 1, Max: 10, Initial: 1},
		Controller: schemas.ControllerSpec{Name: "default", Params: json.RawMessage(`{"actuation_size": 2}`)}}
	sub := ongoing(t, c, &schemas.JobRecord{ID: job, Spec: spec})
	progress := func(sec int, e float64) *schemas.Progress {
		return &schemas.Progress{Job: job, At: t0.Add(time.Duration(sec) * time.Second), Error: e, Replicas: 1, Total: 100}
	}

	stop := runStage(t, c)
	publishProgress(t, c, progress(2, -2))
	publishProgress(t, c, progress(2, -0.5)) // stale: same time
	publishProgress(t, c, progress(4, -0.5))
	var got []int
	for range 2 {
		d := nextDecision(t, sub)
		got = append(got, d.Replicas)
		if d.Controller != "default" || d.Reason == "" {
			t.Errorf("decision %+v lacks controller or reason", d)
		}
	}
	stop()

	stop = runStage(t, c)
	defer stop()
	publishProgress(t, c, progress(3, -1)) // older than the last acted on
	publishProgress(t, c, progress(6, -1))
	d := nextDecision(t, sub)
	got = append(got, d.Replicas)
	if !d.At.Equal(t0.Add(6 * time.Second)) {
		t.Errorf("decision at %v, want the sample at 6s (the older one is stale)", d.At)
	}
	if diff := cmp.Diff([]int{3, 5, 7}, got); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
}

// TestForecastReachesTheController: a job admitted with a forecast (here the
// spec's item_time hint) is sized at its first sample, before any item is
// done; the deadline controller without one would hold.
func TestForecastReachesTheController(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	const job = "hinted"
	spec := schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{After: schemas.Duration(100 * time.Second)},
		Replicas: schemas.Replicas{Min: 1, Max: 10, Initial: 1}, Controller: schemas.ControllerSpec{Name: "deadline"}}
	sub := ongoing(t, c, &schemas.JobRecord{ID: job, Spec: spec, Total: 110,
		Prediction: &schemas.Prediction{Basis: schemas.BasisHint, ItemTime: schemas.Duration(time.Second), Startup: schemas.Duration(5 * time.Second)}})
	defer runStage(t, c)()
	publishProgress(t, c, &schemas.Progress{Job: job, At: t0.Add(2 * time.Second), Total: 110, QueueLength: 110, TimeProgress: 0.02})
	// 110 items of 1 s by 100 s with a 10 s start-up (a hint, not history):
	// the initial replica and one more.
	if d := nextDecision(t, sub); d.Replicas != 2 || !strings.Contains(d.Reason, "items/s per replica (hint)") {
		t.Errorf("decision %d %q, want 2 replicas from the hint", d.Replicas, d.Reason)
	}
}

// TestDecisionsOnChangeAndHeartbeat: a decision is published when the
// desired replicas change, and otherwise once per heartbeat (30 s of
// progress time by default) marked unchanged; a restarted stage keeps the
// rhythm from its saved state. Issue 19: an idle job published a decision
// per sample, about one a second. The threshold controller keeps its count
// while the error is within its triggers and adds one replica when late.
func TestDecisionsOnChangeAndHeartbeat(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	const job = "idle"
	spec := schemas.JobSpec{Mode: schemas.Streaming, Replicas: schemas.Replicas{Min: 1, Max: 10, Initial: 1},
		Controller: schemas.ControllerSpec{Name: "default", Params: json.RawMessage(`{"trigger_up": 0.5, "trigger_down": 0.5}`)}}
	sub := ongoing(t, c, &schemas.JobRecord{ID: job, Spec: spec})
	type decision struct {
		Sec, Replicas int
		Unchanged     bool
	}
	// run publishes one sample a second of progress time over [from, to],
	// late (error -1) at the seconds in late and on time otherwise, then
	// returns the decisions up to the one on the last sample, which is late:
	// the stage handles a job's samples in order.
	run := func(from, to int, late ...int) []decision {
		t.Helper()
		for sec := from; sec <= to; sec++ {
			e := 0.0
			if sec == to || slices.Contains(late, sec) {
				e = -1
			}
			publishProgress(t, c, &schemas.Progress{Job: job, At: t0.Add(time.Duration(sec) * time.Second), Error: e, Replicas: 1})
		}
		var got []decision
		for {
			d := nextDecision(t, sub)
			sec := int(d.At.Sub(t0) / time.Second)
			got = append(got, decision{sec, d.Replicas, d.Unchanged})
			if sec == to {
				return got
			}
		}
	}

	stop := runStage(t, c)
	got := run(1, 45, 11)
	stop()
	want := []decision{
		{1, 1, false},  // the first decision
		{11, 2, false}, // a change, at once; 2-10 kept the count within the heartbeat
		{41, 2, true},  // 30 s after the last published one, 12-40 kept the count
		{45, 3, false}, // a change
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}

	stop = runStage(t, c)
	defer stop()
	got = run(50, 76)
	want = []decision{
		{75, 3, true}, // the heartbeat counts from 45, the last one published before the restart
		{76, 4, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions after a restart (-want +got):\n%s", diff)
	}
}

// fixed is a controller from outside Pace's built-in ones: it asks for the
// replicas of its parameters every time.
type fixed struct{ Replicas int }

func (f fixed) Decide(p schemas.Progress) (schemas.Decision, error) {
	return schemas.Decision{Job: p.Job, At: p.At, Replicas: f.Replicas, Reason: "fixed"}, nil
}
func (fixed) State() (json.RawMessage, error) { return json.RawMessage("{}"), nil }
func (fixed) Restore(json.RawMessage) error   { return nil }

// TestRegistryExtendsThePlugins: a controller added to the built-in ones
// with WithRegistry decides the jobs that name it, with their parameters.
func TestRegistryExtendsThePlugins(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	reg := builtin.Registry()
	reg["fixed"] = func(_ plugin.Job, params json.RawMessage) (plugin.Controller, error) {
		var f fixed
		return f, json.Unmarshal(params, &f)
	}
	spec := schemas.JobSpec{Mode: schemas.Batch, Deadline: schemas.Deadline{After: schemas.Duration(100 * time.Second)},
		Replicas:   schemas.Replicas{Min: 1, Max: 10, Initial: 1},
		Controller: schemas.ControllerSpec{Name: "fixed", Params: json.RawMessage(`{"Replicas": 4}`)}}
	sub := ongoing(t, c, &schemas.JobRecord{ID: "custom", Spec: spec})
	defer runStageWith(t, c, controller.Config{}, controller.WithRegistry(reg))()
	publishProgress(t, c, &schemas.Progress{Job: "custom", At: t0.Add(time.Second), Replicas: 1, Total: 100})
	if d := nextDecision(t, sub); d.Replicas != 4 || d.Reason != "fixed" {
		t.Errorf("decision %+v, want 4 replicas by the fixed controller", d)
	}
}
