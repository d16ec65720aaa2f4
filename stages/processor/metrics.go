package processor

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the processor's own Prometheus metrics.
type Metrics struct {
	processed prometheus.Counter
	malformed prometheus.Counter
	stale     prometheus.Counter
	errors    prometheus.Counter
	age       prometheus.Histogram
}

// NewMetrics returns unregistered processor metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		processed: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_processor_progress_total",
			Help: "Progress messages published on pace.metrics.<job>.progress."}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_processor_malformed_total",
			Help: "Raw samples that could not be read, dead-lettered on pace.metrics.<job>.dead."}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_processor_stale_total",
			Help: "Raw samples ignored because a newer one of their job was seen."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_processor_errors_total",
			Help: "Progress messages that could not be stored (their sample is redelivered)."}),
		age: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pace_monitor_processor_sample_age_seconds",
			Help:    "Time from a sample's measurement to its processing.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
}

func (m *Metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.processed, m.malformed, m.stale, m.errors, m.age}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

// Collector returns one metric by short name (processed, malformed, stale,
// errors), for tests and dashboards built in code.
func (m *Metrics) Collector(name string) prometheus.Collector {
	return map[string]prometheus.Collector{"processed": m.processed, "malformed": m.malformed,
		"stale": m.stale, "errors": m.errors}[name]
}
