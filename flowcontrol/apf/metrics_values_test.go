package apf_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// TestDispatchGauges drives one queue with two seats on the fake clock
// (G = 3 ms) and checks the virtual-time gauges kube sets at a dispatch:
//
//	t=0  a and b start (S = 0 and 0.003); c waits
//	t=1s a finishes: R advanced at min(3 seats, C=2)/1 queue = 2 per second,
//	     the queue's S is corrected by a's 1 s to 0.006 + 0.997 = 1.003, and
//	     c is dispatched with b still holding a seat there (discounted S 1.000).
func TestDispatchGauges(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, reg := apftest.NewGate(t, clk, apf.Config{MaxRequestsInflight: 5}, apftest.OneQueuedSeat)
	tiny := map[string]string{"priority_level": "tiny"}
	for _, l := range g.Dump() {
		if l.Name == "tiny" && l.CurrentLimit != 2 {
			t.Fatalf("tiny has %d seats, the scenario needs 2", l.CurrentLimit)
		}
	}
	if _, ok := apftest.Gauge(t, reg, "apiserver_flowcontrol_dispatch_r", tiny); ok {
		t.Error("dispatch_r published before any dispatch")
	}
	if v, _ := apftest.Gauge(t, reg, "apiserver_flowcontrol_target_seats", tiny); v != 2 {
		t.Errorf("target_seats{tiny} = %v, want 2 (idle: its lower limit)", v)
	}
	if v, _ := apftest.Gauge(t, reg, "apiserver_flowcontrol_target_seats", map[string]string{"priority_level": "exempt"}); v != 0 {
		t.Errorf("target_seats{exempt} = %v, want 0 (its own take, not another level's target)", v)
	}

	attrs := policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get", Path: "/x"}
	a, err := g.Admit(context.Background(), attrs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Admit(context.Background(), attrs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name  string
		bound string
		want  float64
	}{{"apiserver_flowcontrol_dispatch_r", "", 0}, {"apiserver_flowcontrol_latest_s", "", 0.003},
		{"apiserver_flowcontrol_next_s_bounds", "min", 0.003}, {"apiserver_flowcontrol_next_discounted_s_bounds", "max", 0}}
	check := func(when string) {
		t.Helper()
		for _, c := range checks {
			labels := map[string]string{"priority_level": "tiny"}
			if c.bound != "" {
				labels["bound"] = c.bound
			}
			if v, ok := apftest.Gauge(t, reg, c.name, labels); !ok || math.Abs(v-c.want) > 1e-9 {
				t.Errorf("%s: %s%v = %v (present %v), want %v", when, c.name, labels, v, ok, c.want)
			}
		}
	}
	check("after b")

	queued := make(chan *apf.Admission)
	go func() {
		c, err := g.Admit(context.Background(), attrs, nil, "")
		if err != nil {
			t.Error(err)
		}
		queued <- c
	}()
	for deadline := time.Now().Add(apftest.Patience); ; time.Sleep(time.Millisecond) {
		if d := g.Dump(); len(d) > 0 && apftest.Waiting(d, "tiny") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c never queued")
		}
	}
	a.Finish(func() { clk.Step(time.Second) })
	c := <-queued
	checks = []struct {
		name  string
		bound string
		want  float64
	}{{"apiserver_flowcontrol_dispatch_r", "", 2}, {"apiserver_flowcontrol_latest_s", "", 1.003},
		{"apiserver_flowcontrol_next_s_bounds", "min", 1.003}, {"apiserver_flowcontrol_next_s_bounds", "max", 1.003},
		{"apiserver_flowcontrol_next_discounted_s_bounds", "min", 1}, {"apiserver_flowcontrol_next_discounted_s_bounds", "max", 1}}
	check("after c")
	b.Finish(nil)
	c.Finish(nil)
}

// TestQueueLengthAfterEnqueue checks request_queue_length_after_enqueue
// observes, as kube does, the length of the queue each request joined rather
// than the level's queued total. On two seats: alice's a1 and a2 run (queue
// lengths 1 and 1), then a3 waits in alice's queue (1), b1 in bob's (1, the
// level has 2 waiting) and a4 behind a3 (2, the level has 3): sum 6 in 5
// observations, where the level totals would sum to 1+1+1+2+3 = 8. An exempt
// request is not observed.
func TestQueueLengthAfterEnqueue(t *testing.T) {
	g, reg := apftest.NewGate(t, eventclock.NewFake(time.Unix(1000, 0)), apf.Config{MaxRequestsInflight: 5}, apftest.TwoFlows)
	for _, l := range g.Dump() {
		if l.Name == "split" && l.CurrentLimit != 2 {
			t.Fatalf("split has %d seats, the scenario needs 2", l.CurrentLimit)
		}
	}
	user := func(name string) policy.Attributes {
		return policy.Attributes{User: name, Groups: []string{"system:authenticated"}, Verb: "get", Path: "/x"}
	}
	var running []*apf.Admission
	for range 2 {
		a, err := g.Admit(context.Background(), user("alice"), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, a)
	}
	queued := make(chan *apf.Admission)
	for i, name := range []string{"alice", "bob", "alice"} {
		go func() {
			a, err := g.Admit(context.Background(), user(name), nil, "")
			if err != nil {
				t.Error(err)
			}
			queued <- a
		}()
		for deadline := time.Now().Add(apftest.Patience); apftest.Waiting(g.Dump(), "split") != i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("request %d of %s never queued", i+1, name)
			}
		}
	}
	for _, l := range g.Dump() {
		if l.Name != "split" {
			continue
		}
		for _, q := range l.QueueSet.Queues {
			if n := len(q.Waiting); n > 2 {
				t.Fatalf("a queue of split has %d waiting, the scenario needs alice's 2 and bob's 1 apart", n)
			}
		}
	}
	exempt, err := g.Admit(context.Background(), policy.Attributes{User: "root", Groups: []string{"system:masters"}, Verb: "get", Path: "/x"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	exempt.Finish(nil)
	// An exempt request never waits, and kube does not time it as waiting.
	for _, m := range apftest.Series(t, reg, "apiserver_flowcontrol_request_wait_duration_seconds") {
		if m["priority_level"] == "exempt" {
			t.Errorf("request_wait_duration_seconds has a series for the exempt level: %v", m)
		}
	}

	if sum, count := apftest.HistogramTotals(t, reg, "apiserver_flowcontrol_request_queue_length_after_enqueue"); sum != 6 || count != 5 {
		t.Errorf("request_queue_length_after_enqueue: sum %v over %d observations, want 6 over 5", sum, count)
	}
	for _, a := range running {
		a.Finish(nil)
	}
	for range 3 {
		if a := <-queued; a != nil {
			a.Finish(nil)
		}
	}
}

// TestInqueueGauges checks current_inqueue_requests and current_inqueue_seats
// count, as kube does, only requests waiting in a queue: from joining it
// until dispatched or withdrawn, not for the whole of Admit. On two seats:
// alice's a1 and a2 run at once and an exempt request runs (none counted; the
// exempt level has no series at all), then alice's a3 and bob's b1 wait (2);
// bob gives up (1); a1's Finish dispatches a3, which leaves the gauge before
// a3's Admit even returns (0); a4 waits (1) until its 15 s wait limit passes
// on the fake clock (0).
func TestInqueueGauges(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, reg := apftest.NewGate(t, clk, apf.Config{MaxRequestsInflight: 5}, apftest.TwoFlows)
	user := func(name string) policy.Attributes {
		return policy.Attributes{User: name, Groups: []string{"system:authenticated"}, Verb: "get", Path: "/x"}
	}
	check := func(when string, want float64) {
		t.Helper()
		series := map[string]string{"priority_level": "split", "flow_schema": "by-user"}
		for _, name := range []string{"apiserver_flowcontrol_current_inqueue_requests", "apiserver_flowcontrol_current_inqueue_seats"} {
			if got, ok := apftest.Gauge(t, reg, name, series); !ok || got != want {
				t.Fatalf("%s: %s = %v (present %v), want %v", when, name, got, ok, want)
			}
		}
	}
	admit := func(ctx context.Context, name string) *apf.Admission {
		t.Helper()
		a, err := g.Admit(ctx, user(name), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	type result struct {
		adm *apf.Admission
		err error
	}
	queue := func(ctx context.Context, name string, nowWaiting int) chan result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			a, err := g.Admit(ctx, user(name), nil, "")
			done <- result{a, err}
		}()
		for deadline := time.Now().Add(apftest.Patience); apftest.Waiting(g.Dump(), "split") != nowWaiting; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never queued", name)
			}
		}
		return done
	}

	a1, a2 := admit(context.Background(), "alice"), admit(context.Background(), "alice")
	check("a1 and a2 dispatched at once", 0)
	exempt, err := g.Admit(context.Background(), policy.Attributes{User: "root", Groups: []string{"system:masters"}, Verb: "get", Path: "/x"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := apftest.Gauge(t, reg, "apiserver_flowcontrol_current_inqueue_requests", map[string]string{"priority_level": "exempt"}); ok {
		t.Fatalf("an exempt request made a current_inqueue_requests series (%v)", v)
	}
	exempt.Finish(nil)
	a3 := queue(context.Background(), "alice", 1)
	bobCtx, bobGivesUp := context.WithCancel(context.Background())
	defer bobGivesUp()
	b1 := queue(bobCtx, "bob", 2)
	check("a3 and b1 waiting", 2)
	bobGivesUp()
	if r := <-b1; !isTimeOut(r.err) {
		t.Fatalf("b1: %v, want a time-out rejection", r.err)
	}
	check("b1 withdrawn", 1)
	a1.Finish(nil)
	check("a3 dispatched by a1's Finish", 0)
	a3adm := (<-a3).adm
	a4 := queue(context.Background(), "alice", 1)
	check("a4 waiting", 1)
	clk.Step(16 * time.Second)
	if r := <-a4; !isTimeOut(r.err) {
		t.Fatalf("a4: %v, want a time-out rejection", r.err)
	}
	check("a4 timed out", 0)
	a2.Finish(nil)
	a3adm.Finish(nil)
}

// isTimeOut reports whether err is a time-out rejection.
func isTimeOut(err error) bool {
	var rej *flowcontrol.RejectedError
	return errors.As(err, &rej) && rej.Reason == flowcontrol.ReasonTimeOut
}

// TestFinalSeatsStayExecuting checks that a write's final seats (the watch
// events it causes, AdditionalLatency long) count among
// current_executing_seats until the queue set releases them, while the
// request itself stops counting among current_executing_requests when it
// finishes, as kube-apiserver counts them.
func TestFinalSeatsStayExecuting(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, reg := apftest.NewGate(t, clk, apf.Config{MaxRequestsInflight: 400}, "")
	for range 25 {
		g.Watches().Register(&work.Request{Verb: "watch", Resource: "pods", Namespace: "a"})
	}
	attrs := policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, Verb: "create",
		APIGroup: "", Resource: "pods", Namespace: "a", IsResourceRequest: true, Path: "/api/v1/namespaces/a/pods"}
	a, err := g.Admit(context.Background(), attrs, &work.Request{Verb: "create", Resource: "pods", Namespace: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	est := a.Estimate()
	if est.FinalSeats == 0 || est.AdditionalLatency <= 0 {
		t.Fatalf("estimate %+v: the scenario needs final seats", est)
	}
	labels := map[string]string{"priority_level": a.Classification.PriorityLevel.Name, "flow_schema": a.Classification.FlowSchema.Name}
	value := func(name string) float64 {
		t.Helper()
		v, _ := apftest.Gauge(t, reg, "apiserver_flowcontrol_"+name, labels)
		return v
	}
	a.Finish(func() {
		if r, s := value("current_executing_requests"), value("current_executing_seats"); r != 1 || s != float64(est.MaxSeats()) {
			t.Errorf("executing: %v requests, %v seats; want 1, %d", r, s, est.MaxSeats())
		}
	})
	if r, s := value("current_executing_requests"), value("current_executing_seats"); r != 0 || s != float64(est.MaxSeats()) {
		t.Errorf("in its final phase: %v requests, %v seats; want 0, %d (its final seats)", r, s, est.MaxSeats())
	}
	clk.Step(est.AdditionalLatency)
	if s := value("current_executing_seats"); s != 0 {
		t.Errorf("after its final phase: %v seats, want 0", s)
	}
}

// TestUtilizationObservedEverySecond pins deviation 9 of docs/flowcontrol.md:
// the utilization histograms observe each level's ratio at the end of every
// second of the gate's clock, so their count is whole seconds and their sum
// adds one ratio a second (kube weighs each value by the time it held).
func TestUtilizationObservedEverySecond(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, reg := apftest.NewGate(t, clk, apf.Config{MaxRequestsInflight: 400}, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	attrs := policy.Attributes{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get",
		Resource: "pods", Namespace: "a", Name: "p", IsResourceRequest: true, Path: "/api/v1/namespaces/a/pods/p"}
	a, err := g.Admit(context.Background(), attrs, &work.Request{Verb: "get", Resource: "pods", Namespace: "a", Name: "p"}, "")
	if err != nil {
		t.Fatal(err)
	}
	level := a.Classification.PriorityLevel.Name
	var limit int
	for _, l := range g.Dump() {
		if l.Name == level {
			limit = l.CurrentLimit
		}
	}
	labels := map[string]string{"priority_level": level}
	count := func() uint64 {
		n, _ := apftest.Histogram(t, reg, "apiserver_flowcontrol_priority_level_seat_utilization", labels)
		return n
	}
	// await polls until there are want observations, or gives up after d.
	await := func(want uint64, d time.Duration) bool {
		for deadline := time.Now().Add(d); count() < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return false
			}
		}
		return true
	}
	// Run's ticker is in place only once its goroutine runs: step until a
	// first observation, then one second at a time.
	for tries := 0; count() == 0; tries++ {
		if tries == 100 {
			t.Fatal("no observation after 100 s of the gate's clock")
		}
		clk.Step(time.Second)
		await(1, 50*time.Millisecond)
	}
	n0 := count()
	for i := uint64(1); i <= 2; i++ {
		clk.Step(time.Second)
		if !await(n0+i, 10*time.Second) {
			t.Fatalf("%d observations, want %d", count(), n0+i)
		}
	}
	n, sum := apftest.Histogram(t, reg, "apiserver_flowcontrol_priority_level_seat_utilization", labels)
	if want := float64(n) / float64(limit); n != n0+2 || math.Abs(sum-want) > 1e-9 {
		t.Errorf("seat utilization of %s with 1 of %d seats busy: count %d, sum %v; want %d, %v", level, limit, n, sum, n0+2, want)
	}
	a.Finish(func() {})
}

// TestRemovedLevelKeepsItsSeries: a priority level removed from the policy
// keeps its series at their last values, as kube-apiserver's vectors do,
// and a level that comes back reports live values again.
func TestRemovedLevelKeepsItsSeries(t *testing.T) {
	g, reg := apftest.NewGate(t, eventclock.NewFake(time.Unix(1000, 0)), apf.Config{MaxRequestsInflight: 5}, apftest.TwoFlows)
	split := map[string]string{"priority_level": "split"}
	before, ok := apftest.Gauge(t, reg, "apiserver_flowcontrol_nominal_limit_seats", split)
	if !ok || before <= 0 {
		t.Fatalf("nominal_limit_seats{split} = %v, %v before removal", before, ok)
	}
	if err := g.Reconfigure(context.Background(), policy.Defaults()); err != nil {
		t.Fatal(err)
	}
	for _, l := range g.Dump() {
		if l.Name == "split" {
			t.Fatal("split still in the engine: the test must remove it")
		}
	}
	for range 2 { // the scrape after removal and any later one
		if after, ok := apftest.Gauge(t, reg, "apiserver_flowcontrol_nominal_limit_seats", split); !ok || after != before {
			t.Fatalf("nominal_limit_seats{split} = %v, %v after removal, want kept at %v", after, ok, before)
		}
	}
	if _, ok := apftest.Gauge(t, reg, "apiserver_flowcontrol_epoch_advance_total", map[string]string{"priority_level": "split", "success": "true"}); !ok {
		t.Error("epoch_advance_total{split} vanished with its level")
	}
	// Back, with another share: live again.
	objs, err := policy.Load(strings.NewReader(strings.Replace(apftest.TwoFlows, "nominalConcurrencyShares: 100", "nominalConcurrencyShares: 300", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reconfigure(context.Background(), policy.Overlay(policy.Defaults(), objs)); err != nil {
		t.Fatal(err)
	}
	if back, _ := apftest.Gauge(t, reg, "apiserver_flowcontrol_nominal_limit_seats", split); back <= before {
		t.Errorf("nominal_limit_seats{split} = %v after it came back with three times the shares, want above %v", back, before)
	}
}
