package apf

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/flowcontrol"
)

const (
	namespace = "apiserver"
	subsystem = "flowcontrol"
)

var (
	durationBuckets    = []float64{0, .005, .02, .05, .1, .2, .5, 1, 2, 5, 10, 15, 30}
	queueLengthBuckets = []float64{0, 10, 25, 50, 100, 250, 500, 1000}
	watchCountBuckets  = []float64{0, 1, 10, 100, 1000, 10000}
	seatBuckets        = []float64{1, 2, 4, 8, 16, 32, 64, 100}
)

// Phase is where a request is: waiting in a queue or executing.
type Phase int

// The phases of a request, for RequestKind.
const (
	Waiting Phase = iota
	Executing
)

// Metrics are the apiserver_flowcontrol_* metrics of kube-apiserver (same
// names, types, labels and buckets), plus apiserver_current_inflight_requests
// and apiserver_current_inqueue_requests. Methods on a nil *Metrics do
// nothing. Register them on a registry of your own, never the global one.
type Metrics struct {
	rejectedTotal, dispatchedTotal, terminations         *prometheus.CounterVec
	inqueue, inqueueSeats, executingReqs, executingSeats *prometheus.GaugeVec
	queueLength, wait, execution, watchCount, workSeats  *prometheus.HistogramVec
	inflight, inqueueKind                                *prometheus.GaugeVec
	seatUtil, requestUtil, readVsWrite, demandSeats      *prometheus.HistogramVec
	fairFrac                                             prometheus.Gauge
	levelGauges                                          *levelCollector

	mu    sync.Mutex // guards the fields below
	kinds [2][2]int  // [readOnly][phase] current
	peaks [2][2]int  // [readOnly][phase] peak since the last tick
}

func newCounter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func newGauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func newHistogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets}, labels)
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	pf := []string{"priority_level", "flow_schema"}
	m := &Metrics{
		rejectedTotal:   newCounter("rejected_requests_total", "Number of requests rejected by API Priority and Fairness subsystem", "priority_level", "flow_schema", "reason"),
		dispatchedTotal: newCounter("dispatched_requests_total", "Number of requests executed by API Priority and Fairness subsystem", pf...),
		terminations:    newTerminations(),
		inqueue:         newGauge("current_inqueue_requests", "Number of requests currently pending in queues of the API Priority and Fairness subsystem", pf...),
		inqueueSeats:    newGauge("current_inqueue_seats", "Number of seats currently pending in queues of the API Priority and Fairness subsystem", pf...),
		executingReqs:   newGauge("current_executing_requests", "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem", pf...),
		executingSeats:  newGauge("current_executing_seats", "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem", pf...),
		queueLength:     newHistogram("request_queue_length_after_enqueue", "Length of queue in the API Priority and Fairness subsystem, as seen by each request after it is enqueued", queueLengthBuckets, pf...),
		wait:            newHistogram("request_wait_duration_seconds", "Length of time a request spent waiting in its queue", durationBuckets, "priority_level", "flow_schema", "execute"),
		execution:       newHistogram("request_execution_seconds", "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in the API Priority and Fairness subsystem", durationBuckets, "priority_level", "flow_schema", "type"),
		watchCount:      newHistogram("watch_count_samples", "count of watchers for mutating requests in API Priority and Fairness", watchCountBuckets, pf...),
		workSeats:       newHistogram("work_estimated_seats", "Number of estimated seats (maximum of initial and final seats) associated with requests in API Priority and Fairness", seatBuckets, pf...),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "current_inflight_requests",
			Help: "Maximal number of currently used inflight request limit of this apiserver per request kind in last second."}, []string{"request_kind"}),
		inqueueKind: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "current_inqueue_requests",
			Help: "Maximal number of queued requests in this apiserver per request kind in last second."}, []string{"request_kind"}),
		seatUtil: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: subsystem, Name: "priority_level_seat_utilization",
			Help:    "Observations, at the end of every second, of utilization of seats for any stage of execution (but only initial stage for WATCHes)",
			Buckets: []float64{0, .1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99, 1}, ConstLabels: prometheus.Labels{"phase": "executing"}}, []string{"priority_level"}),
		requestUtil: newHistogram("priority_level_request_utilization", "Observations, at the end of every second, of number of requests (as a fraction of the relevant limit) waiting or in any stage of execution (but only initial stage for WATCHes)",
			[]float64{0, .001, .003, .01, .03, .1, .25, .5, .75, 1}, "phase", "priority_level"),
		readVsWrite: newHistogram("read_vs_write_current_requests", "Observations, at the end of every second, of number of requests (as a fraction of the relevant limit) waiting or in regular stage of execution",
			[]float64{0, .001, .01, .1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99, 1}, "phase", "request_kind"),
		demandSeats: newHistogram("demand_seats", "Observations, at the end of every second, of (the number of seats each priority level could use) / (nominal number of seats for that level)",
			[]float64{.2, .4, .6, .8, 1, 1.2, 1.4, 1.7, 2, 2.8, 4, 6}, "priority_level"),
		fairFrac: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: "seat_fair_frac",
			Help: "Fair fraction of server's concurrency to allocate to each priority level that can use it"}),
		levelGauges: &levelCollector{},
	}
	cs := []prometheus.Collector{m.rejectedTotal, m.dispatchedTotal, m.terminations, m.inqueue, m.inqueueSeats, m.executingReqs,
		m.executingSeats, m.queueLength, m.wait, m.execution, m.watchCount, m.workSeats, m.inflight, m.inqueueKind,
		m.seatUtil, m.requestUtil, m.readVsWrite, m.demandSeats, m.fairFrac, m.levelGauges}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"readOnly", "mutating"} {
		m.inflight.WithLabelValues(k)
		m.inqueueKind.WithLabelValues(k)
	}
	return m, nil
}

func (m *Metrics) estimated(pl, fs string, seats int) {
	if m != nil {
		m.workSeats.WithLabelValues(pl, fs).Observe(float64(seats))
	}
}

func (m *Metrics) watchCountSample(pl, fs string, n int) {
	if m != nil {
		m.watchCount.WithLabelValues(pl, fs).Observe(float64(n))
	}
}

// queueChanged follows the requests waiting in queues, as kube's queue set
// does (the engine's queue observer): a request counts in current_inqueue_*
// from joining its queue until it is dispatched or withdrawn, and the length
// of the queue it joined is observed right after it joined.
func (m *Metrics) queueChanged(ev flowcontrol.QueueEvent) {
	if m == nil {
		return
	}
	delta := -1
	if ev.Kind == flowcontrol.QueueEnqueued {
		delta = 1
		m.queueLength.WithLabelValues(ev.PriorityLevel, ev.FlowSchema).Observe(float64(ev.QueueLength))
	}
	m.inqueue.WithLabelValues(ev.PriorityLevel, ev.FlowSchema).Add(float64(delta))
	m.inqueueSeats.WithLabelValues(ev.PriorityLevel, ev.FlowSchema).Add(float64(delta * ev.Seats))
}

func (m *Metrics) rejected(pl, fs string, err error, wait time.Duration) {
	if m == nil {
		return
	}
	var rej *flowcontrol.RejectedError
	if errors.As(err, &rej) {
		m.rejectedTotal.WithLabelValues(pl, fs, string(rej.Reason)).Inc()
	}
	m.wait.WithLabelValues(pl, fs, "false").Observe(wait.Seconds())
}

// dispatched counts a dispatch and observes its wait, except on an exempt
// level, whose requests kube-apiserver does not time as waiting at all.
func (m *Metrics) dispatched(pl, fs string, wait time.Duration, exempt bool) {
	if m == nil {
		return
	}
	m.dispatchedTotal.WithLabelValues(pl, fs).Inc()
	if !exempt {
		m.wait.WithLabelValues(pl, fs, "true").Observe(wait.Seconds())
	}
}

// executing counts requests that start (delta 1) or end (-1) executing.
func (m *Metrics) executing(pl, fs string, delta int) {
	if m != nil {
		m.executingReqs.WithLabelValues(pl, fs).Add(float64(delta))
	}
}

// seats counts seats taken at dispatch (delta > 0) and given back when the
// queue set releases them (< 0).
func (m *Metrics) seats(pl, fs string, delta int) {
	if m != nil {
		m.executingSeats.WithLabelValues(pl, fs).Add(float64(delta))
	}
}

func (m *Metrics) executed(pl, fs, kind string, d time.Duration) {
	if m != nil {
		m.execution.WithLabelValues(pl, fs, kind).Observe(d.Seconds())
	}
}

// RequestKind tracks read-only and mutating requests waiting or executing,
// for the last-second peaks of apiserver_current_inqueue_requests and
// apiserver_current_inflight_requests: the HTTP front ends call it, which
// know a request's kind.
func (m *Metrics) RequestKind(readOnly bool, p Phase, delta int) {
	if m == nil {
		return
	}
	k := 1
	if readOnly {
		k = 0
	}
	m.mu.Lock()
	m.kinds[k][p] += delta
	m.peaks[k][p] = max(m.peaks[k][p], m.kinds[k][p])
	m.mu.Unlock()
}

// tick publishes the peaks of the last period and restarts them from the
// current values, and samples the utilization histograms; Gate.Run calls it
// every second. kube's timing-ratio histograms weigh every nanosecond; these
// observe the ratios once a second, so their counts are (whole) seconds
// (deviation 9 of docs/flowcontrol.md).
func (m *Metrics) tick(g *Gate) {
	if m == nil {
		return
	}
	m.mu.Lock()
	peaks := m.peaks
	m.peaks = m.kinds
	kinds := m.kinds
	m.mu.Unlock()
	gen := g.current()
	m.fairFrac.Set(gen.ctl.FairFraction())
	var queueCapacity, nominalSum float64
	cfgs := map[string]flowcontrol.PriorityLevel{}
	for _, l := range gen.cfg.Levels {
		cfgs[l.Name] = l
	}
	for _, l := range gen.ctl.Dump() {
		cfg := cfgs[l.Name] // zero for a lingering (removed) level
		limit := float64(max(1, l.CurrentLimit))
		qs := l.QueueSet
		m.seatUtil.WithLabelValues(l.Name).Observe(float64(qs.SeatsInUse) / limit)
		m.requestUtil.WithLabelValues("executing", l.Name).Observe(float64(qs.Executing) / limit)
		m.requestUtil.WithLabelValues("waiting", l.Name).Observe(float64(qs.Waiting) / float64(max(1, cfg.QueueLengthLimit)*max(1, cfg.Queues)))
		m.demandSeats.WithLabelValues(l.Name).Observe(float64(qs.SeatsInUse+qs.SeatsWaiting) / limit)
		queueCapacity += float64(cfg.Queues * cfg.QueueLengthLimit)
		nominalSum += float64(l.Limits.Nominal)
	}
	for k, name := range []string{"readOnly", "mutating"} {
		m.readVsWrite.WithLabelValues("waiting", name).Observe(float64(kinds[k][Waiting]) / max(1, queueCapacity))
		m.readVsWrite.WithLabelValues("executing", name).Observe(float64(kinds[k][Executing]) / max(1, nominalSum))
	}
	for k, name := range []string{"readOnly", "mutating"} {
		m.inqueueKind.WithLabelValues(name).Set(float64(peaks[k][Waiting]))
		m.inflight.WithLabelValues(name).Set(float64(peaks[k][Executing]))
	}
}

func (m *Metrics) attach(g *Gate) {
	if m != nil {
		m.levelGauges.set(g)
	}
}
