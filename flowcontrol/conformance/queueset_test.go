package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/queueset"
	"github.com/pace-platform/pace/flowcontrol/work"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/util/flowcontrol/debug"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	kqueueset "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset"
	kclock "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/testing/eventclock"
	"k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/component-base/metrics/legacyregistry"
)

var traceT0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// kubeRequest is a request in kube's queue set together with the goroutine
// blocked in its Finish.
type kubeRequest struct {
	cancel   context.CancelFunc
	started  chan struct{} // closed once Finish has synced and runs the work
	release  chan struct{}
	done     chan struct{}
	executed bool
}

type kubeSide struct {
	clk  *kclock.Fake
	qs   fq.QueueSet
	reqs map[string]*kubeRequest
}

func newKubeSide(t *testing.T, cfg fq.QueuingConfig, limit int) *kubeSide {
	t.Helper()
	clk, _ := kclock.NewFake(traceT0, 0, nil)
	qsc, err := kqueueset.NewQueueSetFactory(clk).BeginConstruction(cfg,
		metrics.RatioedGaugeVecPhasedElementPair(metrics.PriorityLevelConcurrencyGaugeVec, 1, 1, []string{cfg.Name}),
		metrics.PriorityLevelExecutionSeatsGaugeVec.NewForLabelValuesSafe(0, 1, []string{cfg.Name}),
		fq.NewNamedIntegrator(clk, cfg.Name))
	if err != nil {
		t.Fatal(err)
	}
	return &kubeSide{clk: clk, qs: qsc.Complete(fq.DispatchingConfig{ConcurrencyLimit: limit, ConcurrencyDenominator: max(limit, 1)}),
		reqs: map[string]*kubeRequest{}}
}

func (k *kubeSide) start(est work.Estimate, hash uint64, label string) bool {
	ctx, cancel := context.WithCancel(genericrequest.WithUser(context.Background(), &user.DefaultInfo{Name: label}))
	req, _ := k.qs.StartRequest(ctx, &fcrequest.WorkEstimate{InitialSeats: uint64(est.InitialSeats), FinalSeats: uint64(est.FinalSeats),
		AdditionalLatency: est.AdditionalLatency}, hash, "", "fs", label, nil, nil)
	if req == nil {
		cancel()
		return false
	}
	kr := &kubeRequest{cancel: cancel, started: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	k.reqs[label] = kr
	go func() {
		req.Finish(func() { kr.executed = true; close(kr.started); <-kr.release })
		close(kr.done)
	}()
	return true
}

func (k *kubeSide) finish(label string) {
	kr := k.reqs[label]
	close(kr.release)
	<-kr.done
}

func (k *kubeSide) cancel(label string) {
	kr := k.reqs[label]
	kr.cancel()
	<-kr.done
	if kr.executed {
		panic("cancelled request executed") // the harness only cancels waiting requests
	}
}

// advance moves kube's clock event by event. After each event time it waits
// until every dispatched request's Finish goroutine has re-synced virtual time,
// as it would before the clock moved on in a real server.
func (k *kubeSide) advance(d time.Duration) {
	lim := k.clk.Now().Add(d)
	for {
		next, ok := k.clk.GetNextTime()
		if !ok || next.After(lim) {
			break
		}
		k.clk.SetTime(next)
		k.settle()
	}
	k.clk.SetTime(lim)
}

// settle waits until the Finish goroutine of every executing request runs the work.
func (k *kubeSide) settle() {
	d := k.qs.Dump(true)
	for _, q := range append(d.Queues, debug.QueueDump{RequestsExecuting: d.QueuelessExecutingRequests}) {
		for _, r := range q.RequestsExecuting {
			<-k.reqs[r.UserName].started
		}
	}
}

// view is the comparable state of a queue set.
type view struct {
	Queues                                       []queueView
	Queueless                                    []string
	Waiting, Executing, SeatsInUse, SeatsWaiting int
	Rejected                                     int
}

type queueView struct {
	Waiting, Executing []string
	NextDispatchR      string
	SeatsInUse         int
	MaxSeatsSum        int
	TotalWorkSum       string
}

func labels[T any](rs []T, label func(T) string, sorted bool) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, label(r))
	}
	if sorted {
		slices.Sort(out)
	}
	return out
}

func paceView(d queueset.Dump) view {
	l := func(r queueset.RequestDump) string { return r.Label }
	v := view{Queueless: labels(d.QueuelessExecuting, l, true), Waiting: d.Waiting, Executing: d.Executing,
		SeatsInUse: d.SeatsInUse, SeatsWaiting: d.SeatsWaiting, Rejected: d.Rejected}
	for _, q := range d.Queues {
		v.Queues = append(v.Queues, queueView{Waiting: labels(q.Waiting, l, false), Executing: labels(q.Executing, l, true),
			NextDispatchR: q.NextDispatchR.String(), SeatsInUse: q.SeatsInUse, MaxSeatsSum: q.MaxSeatsSum, TotalWorkSum: q.TotalWorkSum.String()})
	}
	return v
}

func kubeView(d debug.QueueSetDump) view {
	l := func(r debug.RequestDump) string { return r.UserName }
	v := view{Queueless: labels(d.QueuelessExecutingRequests, l, true), Waiting: d.Waiting, Executing: d.Executing,
		SeatsInUse: d.SeatsInUse, SeatsWaiting: d.SeatsWaiting, Rejected: d.Rejected}
	for _, q := range d.Queues {
		v.Queues = append(v.Queues, queueView{Waiting: labels(q.Requests, l, false), Executing: labels(q.RequestsExecuting, l, true),
			NextDispatchR: q.NextDispatchR, SeatsInUse: q.SeatsInUse, MaxSeatsSum: q.QueueSum.MaxSeatsSum, TotalWorkSum: q.QueueSum.TotalWorkSum})
	}
	return v
}

// TestQueueSetTraceMatchesKube drives Pace's and kube's queue sets with the
// same random trace of arrivals (widths, final seats, lingering latencies),
// finishes, cancellations, clock steps and limit changes, and requires the
// same state after every step: which requests wait in which queue in which
// order, which execute, each queue's nextDispatchR (to 1e-8 seat-seconds),
// seats and reject counts, and after each dispatch from a queue the values
// of kube's dispatch_r, latest_s, next_s_bounds and next_discounted_s_bounds
// gauges, and after every step kube's current_inqueue_requests,
// current_inqueue_seats and the sum and count of
// request_queue_length_after_enqueue (so each observation) equal to what
// Pace's queue events (queueset.WithObserver) add up to. The trace keeps FinalSeats below C and C > 0, so
// none of Pace's documented deviations applies.
func TestQueueSetTraceMatchesKube(t *testing.T) {
	metrics.Register() // kube's gauges exist only once registered
	// Every step gathers kube's registry; its process and Go collectors,
	// which read /proc and the runtime at each gather, say nothing here.
	legacyregistry.Registerer().Unregister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	legacyregistry.Registerer().Unregister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)))
	configs := []struct {
		queues, qll, hand int
	}{{8, 3, 3}, {16, 2, 4}, {1, 4, 1}, {0, 0, 0}, {-1, 0, 0}}
	for ci, cfg := range configs {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("queues=%d/seed=%d", cfg.queues, seed), func(t *testing.T) {
				t.Parallel() // each trace has its own queue sets and clocks
				runTrace(t, rand.New(rand.NewPCG(seed, uint64(ci))), cfg.queues, cfg.qll, cfg.hand)
			})
		}
	}
}

func runTrace(t *testing.T, rng *rand.Rand, queues, qll, hand int) {
	limit := 4 + rng.IntN(5)
	name := fmt.Sprintf("trace-%d-%d", queues, rng.Uint32())
	kube := newKubeSide(t, fq.QueuingConfig{Name: name, DesiredNumQueues: queues, QueueLengthLimit: qll, HandSize: hand}, limit)
	clk := eventclock.NewFake(traceT0)
	var paceQueued queueGauges // Pace's side of kube's queue metrics, from its queue events
	pace, err := queueset.New(clk, queueset.Config{Name: name, Queues: queues, QueueLengthLimit: qll, HandSize: hand}, limit,
		queueset.WithObserver(paceQueued.observe))
	if err != nil {
		t.Fatal(err)
	}
	paceReqs := map[string]*queueset.Request{}
	started, dispatches, compared, comparedDiscounted := 0, 0, 0, 0
	for step := range 600 {
		d := pace.Dump()
		var executing, waiting []string
		for _, q := range d.Queues {
			executing = append(executing, labels(q.Executing, func(r queueset.RequestDump) string { return r.Label }, true)...)
			waiting = append(waiting, labels(q.Waiting, func(r queueset.RequestDump) string { return r.Label }, false)...)
		}
		executing = append(executing, labels(d.QueuelessExecuting, func(r queueset.RequestDump) string { return r.Label }, true)...)
		var op string
		switch x := rng.IntN(20); {
		case x < 9:
			label := fmt.Sprintf("r%d", started)
			started++
			est := work.Estimate{InitialSeats: 1 + rng.IntN(5), FinalSeats: rng.IntN(4)}
			if est.FinalSeats > 0 && rng.IntN(2) == 0 {
				est.AdditionalLatency = time.Duration(1+rng.IntN(250))*time.Millisecond + time.Duration(rng.IntN(1000))
			}
			hash := uint64(rng.IntN(10)) * 0x9e3779b97f4a7c15
			r, reason := pace.Start(est, hash, "fs", label, queueset.Callbacks{})
			kubeOK := kube.start(est, hash, label)
			if (r != nil) != kubeOK {
				t.Fatalf("step %d: start %s %+v: pace admitted=%v (%s), kube admitted=%v", step, label, est, r != nil, reason, kubeOK)
			}
			wantReason := queueset.QueueFull
			if queues < 1 {
				wantReason = queueset.ConcurrencyLimit
			}
			if r == nil && reason != wantReason {
				t.Fatalf("step %d: reject reason %q, want %q", step, reason, wantReason)
			}
			if r != nil {
				paceReqs[label] = r
			}
			op = "start " + label
		case x < 14 && len(executing) > 0:
			label := executing[rng.IntN(len(executing))]
			paceReqs[label].Finish(nil)
			kube.finish(label)
			op = "finish " + label
		case x < 16 && len(waiting) > 0:
			label := waiting[rng.IntN(len(waiting))]
			if !paceReqs[label].Cancel() {
				t.Fatalf("step %d: cancel of waiting %s failed", step, label)
			}
			kube.cancel(label)
			op = "cancel " + label
		case x < 19:
			dt := time.Duration(rng.IntN(200))*time.Millisecond + time.Duration(rng.IntN(1000))
			clk.Step(dt)
			kube.advance(dt)
			op = "advance " + dt.String()
		default:
			limit = 4 + rng.IntN(5)
			pace.SetConcurrencyLimit(limit)
			qsc, err := kube.qs.BeginConfigChange(fq.QueuingConfig{Name: name, DesiredNumQueues: queues, QueueLengthLimit: qll, HandSize: hand})
			if err != nil {
				t.Fatal(err)
			}
			kube.qs = qsc.Complete(fq.DispatchingConfig{ConcurrencyLimit: limit, ConcurrencyDenominator: limit})
			op = fmt.Sprintf("limit %d", limit)
		}
		after := pace.Dump()
		if diff := cmp.Diff(kubeView(kube.qs.Dump(true)), paceView(after)); diff != "" {
			t.Fatalf("step %d (%s): state differs (-kube +pace):\n%s", step, op, diff)
		}
		mfs := kubeGather(t)
		if diff := cmp.Diff(kubeQueueGauges(mfs, name), paceQueued, cmpopts.IgnoreUnexported(queueGauges{})); diff != "" {
			t.Fatalf("step %d (%s): queue metrics differ (-kube +pace):\n%s", step, op, diff)
		}
		if ld := after.LastDispatch; ld.Dispatches != dispatches {
			dispatches = ld.Dispatches
			kubeGauges, paceGauges := kubeDispatchGauges(mfs, name), paceDispatchGauges(ld)
			if ld.DiscountedSMin < 0 { // kube's unsigned arithmetic wraps it around; Pace keeps the sign
				for _, g := range []map[string]float64{kubeGauges, paceGauges} {
					delete(g, "next_discounted_s_bounds/min")
					delete(g, "next_discounted_s_bounds/max")
				}
			}
			compared++
			if ld.DiscountedSMin >= 0 {
				comparedDiscounted++
			}
			if diff := cmp.Diff(kubeGauges, paceGauges, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Fatalf("step %d (%s): dispatch gauges differ (-kube +pace):\n%s", step, op, diff)
			}
		}
		// Upstream's Finish re-syncs virtual time when its goroutine wakes up;
		// let every dispatched request's goroutine get there before time moves.
		kube.settle()
	}
	// drain both
	for _, label := range slices.Sorted(func(yield func(string) bool) {
		for l := range kube.reqs {
			if !yield(l) {
				return
			}
		}
	}) {
		select {
		case <-kube.reqs[label].done:
		default:
			if paceReqs[label].Cancel() {
				kube.cancel(label)
			}
		}
	}
	for {
		d := pace.Dump()
		if d.Executing == 0 {
			break
		}
		for _, q := range d.Queues {
			for _, r := range q.Executing {
				paceReqs[r.Label].Finish(nil)
				kube.finish(r.Label)
			}
		}
		for _, r := range d.QueuelessExecuting {
			paceReqs[r.Label].Finish(nil)
			kube.finish(r.Label)
		}
	}
	clk.Step(time.Minute)
	kube.advance(time.Minute)
	if diff := cmp.Diff(kubeView(kube.qs.Dump(true)), paceView(pace.Dump())); diff != "" {
		t.Fatalf("after drain: state differs (-kube +pace):\n%s", diff)
	}
	if d := pace.Dump(); d.SeatsInUse != 0 || d.Waiting != 0 {
		t.Fatalf("pace not idle after drain: %+v", d)
	}
	mfs := kubeGather(t)
	if diff := cmp.Diff(kubeQueueGauges(mfs, name), paceQueued, cmpopts.IgnoreUnexported(queueGauges{})); diff != "" {
		t.Fatalf("after drain: queue metrics differ (-kube +pace):\n%s", diff)
	}
	t.Logf("dispatch gauges compared after %d steps (%d with the discounted bounds); %d heads did not fit; %d queue lengths after enqueue, %v queued at most",
		compared, comparedDiscounted, pace.Dump().NoAccommodation["fs"], paceQueued.LengthCount, paceQueued.peak)
	if kubeMisses, paceMisses := kubeNoAccommodation(mfs, name), pace.Dump().NoAccommodation["fs"]; kubeMisses != paceMisses {
		t.Fatalf("dispatch attempts whose head did not fit: kube %d, pace %d", kubeMisses, paceMisses)
	}
	if g := kubeDispatchGauges(mfs, name); dispatches == 0 && len(g) != 0 {
		t.Fatalf("kube published dispatch gauges %v where pace never dispatched from a queue", g)
	}
}

// kubeGather gathers kube's metrics once, for the readers below.
func kubeGather(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// kubeDispatchGauges reads the gauges kube's queue set sets at a dispatch
// from a queue (metrics.SetDispatchMetrics) for one priority level, keyed
// by name and bound.
func kubeDispatchGauges(mfs []*dto.MetricFamily, level string) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), "apiserver_flowcontrol_")
		if !ok || !slices.Contains([]string{"dispatch_r", "latest_s", "next_s_bounds", "next_discounted_s_bounds"}, name) {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, lp := range m.Label {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["priority_level"] != level {
				continue
			}
			key := name
			if b := labels["bound"]; b != "" {
				key += "/" + b
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// kubeFlowSeries returns kube's series of the metric name for flow schema
// "fs" at one priority level, or nil if it has none.
func kubeFlowSeries(mfs []*dto.MetricFamily, name, level string) *dto.Metric {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, lp := range m.Label {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["priority_level"] == level && labels["flow_schema"] == "fs" {
				return m
			}
		}
	}
	return nil
}

// kubeNoAccommodation reads kube's request_dispatch_no_accommodation_total
// of flow schema "fs" at one priority level.
func kubeNoAccommodation(mfs []*dto.MetricFamily, level string) int {
	return int(kubeFlowSeries(mfs, "apiserver_flowcontrol_request_dispatch_no_accommodation_total", level).GetCounter().GetValue())
}

// queueGauges is one level's view of kube's queue metrics of flow schema
// "fs": current_inqueue_requests, current_inqueue_seats and the sum and count
// of request_queue_length_after_enqueue.
type queueGauges struct {
	Requests, Seats float64
	LengthSum       float64
	LengthCount     uint64
	peak            float64 // the most requests waiting at once (Pace's side only)
}

// observe follows Pace's queue events as kube's queue set moves its metrics.
func (g *queueGauges) observe(ev queueset.Event) {
	delta := -1.0
	if ev.Kind == queueset.Enqueued {
		delta = 1
		g.LengthSum += float64(ev.QueueLength)
		g.LengthCount++
	}
	g.Requests += delta
	g.Seats += delta * float64(ev.Seats)
	g.peak = max(g.peak, g.Requests)
}

// kubeQueueGauges reads kube's queue metrics of flow schema "fs" at one
// priority level (zero where kube has no series yet).
func kubeQueueGauges(mfs []*dto.MetricFamily, level string) queueGauges {
	h := kubeFlowSeries(mfs, "apiserver_flowcontrol_request_queue_length_after_enqueue", level).GetHistogram()
	return queueGauges{
		Requests:    kubeFlowSeries(mfs, "apiserver_flowcontrol_current_inqueue_requests", level).GetGauge().GetValue(),
		Seats:       kubeFlowSeries(mfs, "apiserver_flowcontrol_current_inqueue_seats", level).GetGauge().GetValue(),
		LengthSum:   h.GetSampleSum(),
		LengthCount: h.GetSampleCount(),
	}
}

// paceDispatchGauges is the same view of Pace's last dispatch.
func paceDispatchGauges(d queueset.DispatchDump) map[string]float64 {
	return map[string]float64{"dispatch_r": d.R.Float(), "latest_s": d.S.Float(),
		"next_s_bounds/min": d.SMin.Float(), "next_s_bounds/max": d.SMax.Float(),
		"next_discounted_s_bounds/min": d.DiscountedSMin, "next_discounted_s_bounds/max": d.DiscountedSMax}
}
