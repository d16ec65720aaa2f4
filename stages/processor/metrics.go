package processor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/internal/promset"
)

// Metrics are the processor's own Prometheus metrics; they register as one
// collector.
type Metrics struct {
	promset.Set
	processed prometheus.Counter
	malformed prometheus.Counter
	stale     prometheus.Counter
	errors    prometheus.Counter
	age       prometheus.Histogram
}

// NewMetrics returns unregistered processor metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
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
	m.Set = promset.Set{m.processed, m.malformed, m.stale, m.errors, m.age}
	return m
}

// Collector returns one metric by short name (processed, malformed, stale,
// errors), for tests and dashboards built in code.
func (m *Metrics) Collector(name string) prometheus.Collector {
	return map[string]prometheus.Collector{"processed": m.processed, "malformed": m.malformed,
		"stale": m.stale, "errors": m.errors}[name]
}
