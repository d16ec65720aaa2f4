package gate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/work"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate"
)

// oneSeat sends tenant requests to a Reject level with one seat (server
// limit 1, so ceil(1×100/ΣNCS) = 1, no borrowing).
const oneSeat = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tenants}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 100, lendablePercent: 0, borrowingLimitPercent: 0, limitResponse: {type: Reject}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: tenants}
spec:
  matchingPrecedence: 100
  priorityLevelConfiguration: {name: tenants}
  rules:
  - subjects: [{kind: Group, group: {name: tenants}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
`

type recorder struct {
	mu       sync.Mutex
	events   []schemas.AdmissionEvent
	outcomes map[string]schemas.KubeOutcome
}

func (r *recorder) outcome(id string) (schemas.KubeOutcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.outcomes[id]
	return o, ok
}

func record(t *testing.T, c *bus.Client) *recorder {
	t.Helper()
	r := &recorder{outcomes: map[string]schemas.KubeOutcome{}}
	sub, err := c.Conn().Subscribe(c.Prefix().Admission("*", "*"), func(m *nats.Msg) {
		ev, err := bus.Decode[schemas.AdmissionEvent](m.Data, m.Header)
		if err != nil {
			t.Error(err)
			return
		}
		if want := c.Prefix().Admission(ev.PriorityLevel, ev.FlowSchema); m.Subject != want {
			t.Errorf("event on %s, want %s", m.Subject, want)
		}
		r.mu.Lock()
		r.events = append(r.events, *ev)
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub2, err := c.Conn().Subscribe(c.Prefix().KubeOutcomes(), func(m *nats.Msg) {
		o, err := bus.Decode[schemas.KubeOutcome](m.Data, m.Header)
		if err != nil {
			t.Error(err)
			return
		}
		r.mu.Lock()
		r.outcomes[o.RequestID] = *o
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe(); _ = sub2.Unsubscribe() })
	return r
}

func publish(t *testing.T, c *bus.Client, id, user string, groups ...string) {
	t.Helper()
	bustest.Publish(t, c, c.Prefix().KubeRequests(), &schemas.KubeRequest{ID: id, Job: "j", User: user,
		Groups: groups, Verb: "patch", APIGroup: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "w", Replicas: 3, At: time.Now()})
}

func TestStageAdmitsRejectsAndReleases(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	rec := record(t, c)
	objs, err := policy.Load(strings.NewReader(oneSeat))
	if err != nil {
		t.Fatal(err)
	}
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.Config{MaxRequestsInflight: 1}, policy.Overlay(policy.Defaults(), objs), nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 10)
	release := make(chan struct{})
	act := gate.ActuatorFunc(func(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
		started <- req.ID
		switch req.ID {
		case "hold":
			<-release
		case "lost":
			<-ctx.Done() // never answers in time
			return nil, ctx.Err()
		}
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, Replicas: req.Replicas, At: time.Now()}, nil
	})
	// The time-out frees hold's seat too: it must outlast the rejection of
	// second by far, on a slow machine as well, and only lost waits it out.
	// The stage's clock stamps its events and its own outcomes.
	stamp := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st, err := gate.New(gate.Deps{Bus: c, Gate: g, Actuator: act}, gate.Config{OutcomeTimeout: 5 * time.Second},
		gate.WithClock(clocktesting.NewFakePassiveClock(stamp)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()

	publish(t, c, "hold", "alice", "tenants")
	if id := <-started; id != "hold" {
		t.Fatalf("started %s", id)
	}
	publish(t, c, "second", "bob", "tenants") // the only seat is held until hold's outcome
	bustest.Eventually(t, 5*time.Second, "second rejected", func() bool { _, ok := rec.outcome("second"); return ok })
	if o, _ := rec.outcome("second"); o.Status != schemas.Rejected || !strings.Contains(o.Reason, "concurrency-limit") {
		t.Errorf("second: %+v, want rejected for concurrency-limit", o)
	}
	close(release)
	bustest.Eventually(t, 5*time.Second, "hold applied", func() bool { _, ok := rec.outcome("hold"); return ok })

	publish(t, c, "lost", "carol", "tenants")
	bustest.Eventually(t, 5*time.Second, "lost reported", func() bool { _, ok := rec.outcome("lost"); return ok })
	if o, _ := rec.outcome("lost"); o.Status != schemas.Failure || !strings.Contains(o.Reason, "seats released") {
		t.Errorf("lost: %+v, want a failure releasing the seats", o)
	}
	for _, id := range []string{"second", "lost"} {
		if o, _ := rec.outcome(id); !o.At.Equal(stamp) {
			t.Errorf("%s: outcome at %v, want the stage clock's %v", id, o.At, stamp)
		}
	}
	publish(t, c, "after", "dave", "tenants") // the seat is free again
	bustest.Eventually(t, 5*time.Second, "after applied", func() bool { o, ok := rec.outcome("after"); return ok && o.Status == schemas.Applied })
	// Pace's own components are exempt even when the tenants' level is full.
	publish(t, c, "internal", "pace-controller", policy.ComponentsGroup)
	bustest.Eventually(t, 5*time.Second, "internal applied", func() bool { o, ok := rec.outcome("internal"); return ok && o.Status == schemas.Applied })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var dispatched, rejected int
	for _, ev := range rec.events {
		if !ev.At.Equal(stamp) {
			t.Errorf("event %+v not at the stage clock's %v", ev, stamp)
		}
		switch {
		case ev.Outcome == schemas.Dispatched && ev.PriorityLevel == "tenants":
			dispatched++
		case ev.Outcome == schemas.Refused && ev.Reason == "concurrency-limit":
			rejected++
		case ev.Outcome == schemas.Dispatched && ev.PriorityLevel == "exempt" && ev.FlowSchema == "pace-internal":
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	if dispatched != 3 || rejected != 1 {
		t.Errorf("dispatched %d, rejected %d; want 3 and 1", dispatched, rejected)
	}
}

// TestStageEventsCarryEstimatedSeats: a scale request is a write, charged
// one seat plus ceil(watches/10) final seats for the watches in progress
// that the process's APF filter admitted on its resource; the dispatched and
// refused events say so.
func TestStageEventsCarryEstimatedSeats(t *testing.T) {
	c := bustest.Client(t, bustest.Server(t))
	rec := record(t, c)
	objs, err := policy.Load(strings.NewReader(oneSeat))
	if err != nil {
		t.Fatal(err)
	}
	g, err := apf.New(eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.Config{MaxRequestsInflight: 1}, policy.Overlay(policy.Defaults(), objs), nil)
	if err != nil {
		t.Fatal(err)
	}
	// 25 watches of the deployments of ns, through the same gate's filter,
	// by an admin (exempt: the other levels have no seat at this server limit).
	tokens, err := auth.ParseTokens(strings.NewReader(`root-token,root,0,"system:masters"` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(auth.Middleware(tokens)(apfhttp.Middleware(g, apfhttp.KubeResolver)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))))
	defer api.Close()
	watchCtx, stopWatches := context.WithCancel(context.Background())
	defer stopWatches()
	for range 25 {
		req, _ := http.NewRequestWithContext(watchCtx, "GET", api.URL+"/apis/apps/v1/namespaces/ns/deployments?watch=true", nil)
		req.Header.Set("Authorization", "Bearer root-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %s", resp.Status)
		}
		defer resp.Body.Close() //nolint:errcheck // a test watch
	}

	release := make(chan struct{})
	act := gate.ActuatorFunc(func(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
		if req.ID == "wide" {
			<-release
		}
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, At: time.Now()}, nil
	})
	st, err := gate.New(gate.Deps{Bus: c, Gate: g, Actuator: act}, gate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()

	publish(t, c, "wide", "alice", "tenants")
	bustest.Eventually(t, 5*time.Second, "wide dispatched", func() bool { return len(rec.eventsFor("wide")) == 1 })
	publish(t, c, "refused", "bob", "tenants") // 3 seats do not fit beside wide's 3
	bustest.Eventually(t, 5*time.Second, "refused", func() bool { _, ok := rec.outcome("refused"); return ok })
	close(release)
	stopWatches()
	bustest.Eventually(t, 5*time.Second, "watches ended", func() bool {
		return g.Watches().WatchCount(&work.Request{Verb: "patch", APIGroup: "apps", Resource: "deployments", Namespace: "ns"}) == 0
	})
	publish(t, c, "narrow", "carol", "tenants")
	bustest.Eventually(t, 5*time.Second, "narrow applied", func() bool { _, ok := rec.outcome("narrow"); return ok })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]struct {
		outcome schemas.AdmissionOutcome
		seats   int
	}{"wide": {schemas.Dispatched, 3}, "refused": {schemas.Refused, 3}, "narrow": {schemas.Dispatched, 1}} {
		evs := rec.eventsFor(id)
		if len(evs) != 1 || evs[0].Outcome != want.outcome || evs[0].Seats != want.seats {
			t.Errorf("%s: events %+v, want one %s with %d seats", id, evs, want.outcome, want.seats)
		}
	}
}

func (r *recorder) eventsFor(id string) []schemas.AdmissionEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []schemas.AdmissionEvent
	for _, ev := range r.events {
		if ev.RequestID == id {
			out = append(out, ev)
		}
	}
	return out
}
