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

type phase int

const (
	waitingPhase phase = iota
	executingPhase
)

// Metrics are the apiserver_flowcontrol_* metrics of kube-apiserver (same
// names, types, labels and buckets), plus apiserver_current_inflight_requests
// and apiserver_current_inqueue_requests. Methods on a nil *Metrics do
// nothing. Register them on a registry of your own, never the global one.
type Metrics struct {
	rejectedTotal, dispatchedTotal, noAccommodation      *prometheus.CounterVec
	inqueue, inqueueSeats, executingReqs, executingSeats *prometheus.GaugeVec
	queueLength, wait, execution, watchCount, workSeats  *prometheus.HistogramVec
	inflight, inqueueKind                                *prometheus.GaugeVec
	levelGauges                                          *levelCollector

	mu       sync.Mutex // guards the fields below
	queuedAt map[string]int
	kinds    [2][2]int // [readOnly][phase] current
	peaks    [2][2]int // [readOnly][phase] peak since the last tick
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
		noAccommodation: newCounter("request_dispatch_no_accommodation_total", "Number of times a dispatch attempt resulted in a non accommodation due to lack of available seats", pf...),
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
		levelGauges: &levelCollector{},
		queuedAt:    map[string]int{},
	}
	cs := []prometheus.Collector{m.rejectedTotal, m.dispatchedTotal, m.noAccommodation, m.inqueue, m.inqueueSeats, m.executingReqs,
		m.executingSeats, m.queueLength, m.wait, m.execution, m.watchCount, m.workSeats, m.inflight, m.inqueueKind, m.levelGauges}
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

func (m *Metrics) queued(pl, fs string, seats, delta int) {
	if m == nil {
		return
	}
	m.inqueue.WithLabelValues(pl, fs).Add(float64(delta))
	m.inqueueSeats.WithLabelValues(pl, fs).Add(float64(delta * seats))
	m.mu.Lock()
	m.queuedAt[pl] += delta
	n := m.queuedAt[pl]
	m.mu.Unlock()
	if delta > 0 {
		m.queueLength.WithLabelValues(pl, fs).Observe(float64(n))
	}
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

func (m *Metrics) dispatched(pl, fs string, wait time.Duration) {
	if m == nil {
		return
	}
	m.dispatchedTotal.WithLabelValues(pl, fs).Inc()
	m.wait.WithLabelValues(pl, fs, "true").Observe(wait.Seconds())
}

func (m *Metrics) executing(pl, fs string, seats, delta int) {
	if m == nil {
		return
	}
	m.executingReqs.WithLabelValues(pl, fs).Add(float64(delta))
	m.executingSeats.WithLabelValues(pl, fs).Add(float64(delta * seats))
}

func (m *Metrics) executed(pl, fs, kind string, d time.Duration) {
	if m != nil {
		m.execution.WithLabelValues(pl, fs, kind).Observe(d.Seconds())
	}
}

// requestKind tracks read-only and mutating requests waiting or executing,
// for the last-second peaks.
func (m *Metrics) requestKind(readOnly bool, p phase, delta int) {
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
// current values; Gate.Run calls it every second.
func (m *Metrics) tick() {
	if m == nil {
		return
	}
	m.mu.Lock()
	peaks := m.peaks
	m.peaks = m.kinds
	m.mu.Unlock()
	for k, name := range []string{"readOnly", "mutating"} {
		m.inqueueKind.WithLabelValues(name).Set(float64(peaks[k][waitingPhase]))
		m.inflight.WithLabelValues(name).Set(float64(peaks[k][executingPhase]))
	}
}

func (m *Metrics) attach(g *Gate) {
	if m != nil {
		m.levelGauges.set(g)
	}
}
