package gate_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate"
)

// TestUnreadableRequestIsDeadLetteredAndTheNextOneAdmitted publishes every
// kind of unreadable message (bustest.Malformed) on the work-queue stream
// PACE_K8S, then a request: each unreadable one is counted and kept as a
// dead letter holding its exact bytes, headers and subject (settling it
// deletes it from the stream), and the gate admits and executes the request.
func TestUnreadableRequestIsDeadLetteredAndTheNextOneAdmitted(t *testing.T) {
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	rec := record(t, c)
	st := runApplyingGate(t, c)

	cases := bustest.PublishMalformed(t, c, c.Prefix().KubeRequests(), &schemas.KubeRequest{ID: "valid", User: "alice", Verb: "get",
		Path: "/healthz", At: time.Now()})
	publish(t, c, "after-garbage", "alice")

	bustest.Eventually(t, 20*time.Second, "the request after the garbage dispatched and executed", func() bool {
		o, ok := rec.outcome("after-garbage")
		return ok && o.Status == schemas.Applied && len(rec.eventsFor("after-garbage")) > 0
	})
	if evs := rec.eventsFor("after-garbage"); len(evs) != 1 || evs[0].Outcome != schemas.Dispatched {
		t.Errorf("admission events %+v, want one dispatch", evs)
	}
	// The subject names no job: the letter is filed under job "unknown".
	var letters []*bus.StoredLetter
	bustest.Eventually(t, 10*time.Second, "the unreadable requests' dead letters", func() bool {
		letters = requestLetters(t, ctx, c)
		return len(letters) >= len(cases)
	})
	kept := make([]*schemas.DeadLetter, len(letters))
	for i, l := range letters {
		kept[i] = l.DeadLetter
		if l.Job != "unknown" {
			t.Errorf("letter of job %q, want unknown", l.Job)
		}
	}
	bustest.CheckKept(t, cases, kept)
	if got := count(t, st.Metrics()); got != float64(len(cases)) {
		t.Errorf("pace_gate_malformed_total = %v, want %d", got, len(cases))
	}
	bustest.Eventually(t, 10*time.Second, "both requests settled, PACE_K8S empty", func() bool {
		s, err := c.JetStream().Stream(ctx, c.Prefix().Stream(schemas.StreamKube))
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
}

// runApplyingGate runs a gate with the default APF configuration whose
// actuator applies every request at once.
func runApplyingGate(t *testing.T, c *bus.Client) *gate.Stage {
	t.Helper()
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), policy.Defaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	act := gate.ActuatorFunc(func(_ context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, Replicas: req.Replicas, At: time.Now()}, nil
	})
	st, err := gate.New(gate.Deps{Bus: c, Gate: g, Actuator: act}, gate.Config{}, gate.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, st.Run)
	return st
}

// requestLetters returns the stored dead letters of messages from
// pace.k8s.requests.
func requestLetters(t *testing.T, ctx context.Context, c *bus.Client) []*bus.StoredLetter {
	t.Helper()
	var out []*bus.StoredLetter
	for l, err := range c.Letters().List(ctx, bus.DeadMessages, "*", false) {
		if err != nil {
			t.Fatal(err)
		}
		if l.Subject == c.Prefix().KubeRequests() {
			out = append(out, l)
		}
	}
	return out
}

// count is the value of counter m.
func count(t *testing.T, m prometheus.Collector) float64 {
	t.Helper()
	var v dto.Metric
	if err := m.(prometheus.Metric).Write(&v); err != nil {
		t.Fatal(err)
	}
	return v.GetCounter().GetValue()
}

// TestDeliveredRequestIsNotTakenForOne: a push consumer can deliver any
// stream's messages into PACE_K8S (NATS does not check a deliver subject
// against its creator's rights; a tenant can make one on its results), and
// the stream stores them under their own subject. A well-formed request
// delivered that way is never executed; the gate takes only what was
// published on pace.k8s.requests.
func TestDeliveredRequestIsNotTakenForOne(t *testing.T) {
	ctx := context.Background()
	c := bustest.Client(t, bustest.Server(t))
	rec := record(t, c)
	runApplyingGate(t, c)

	if _, err := c.JetStream().CreateOrUpdatePushConsumer(ctx, c.Prefix().Stream(schemas.StreamResults), jetstream.ConsumerConfig{
		Name: "into-k8s", FilterSubject: c.Prefix().JobResults("evil"), DeliverSubject: c.Prefix().KubeRequests(),
		AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	bustest.Publish(t, c, c.Prefix().Results("evil", "i1"), &schemas.KubeRequest{ID: "delivered", Job: "j", User: "mallory",
		Verb: "delete", APIGroup: "batch", Resource: "jobs", Namespace: "ns", Name: "w", At: time.Now()})
	bustest.Eventually(t, 20*time.Second, "the delivery stored in PACE_K8S", func() bool {
		s, err := c.JetStream().Stream(ctx, c.Prefix().Stream(schemas.StreamKube))
		return err == nil && s.CachedInfo().State.Msgs > 0
	})
	publish(t, c, "published", "alice")
	bustest.Eventually(t, 20*time.Second, "the published request executed", func() bool {
		_, ok := rec.outcome("published")
		return ok
	})
	if o, ok := rec.outcome("delivered"); ok || len(rec.eventsFor("delivered")) > 0 {
		t.Errorf("the delivered request was taken for one: outcome %+v, events %+v", o, rec.eventsFor("delivered"))
	}
}
