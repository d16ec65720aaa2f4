package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/internal/promset"
)

// Metrics are the collector's own Prometheus metrics; they register as one
// collector.
type Metrics struct {
	promset.Set
	samples   prometheus.Counter
	errors    prometheus.Counter
	malformed prometheus.Counter
	jobs      prometheus.Gauge
	round     prometheus.Histogram
}

// NewMetrics returns unregistered collector metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		samples: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_collector_samples_total",
			Help: "Samples published on pace.metrics.<job>.raw."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_collector_errors_total",
			Help: "Jobs whose sample could not be taken or published."}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_collector_malformed_total",
			Help: "Job records the collector could not read, dead-lettered on pace.metrics.<job>.dead."}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pace_monitor_collector_jobs",
			Help: "Running jobs the collector samples."}),
		round: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pace_monitor_collector_round_seconds",
			Help:    "Time to sample and publish every due job once.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	m.Set = promset.Set{m.samples, m.errors, m.malformed, m.jobs, m.round}
	return m
}
