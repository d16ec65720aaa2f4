// Package prom exposes every job's latest progress as pace_job_* Prometheus
// metrics, labelled by job only. Cardinality is bounded: at most MaxJobs
// jobs are exported (more are counted in pace_monitor_prom_jobs_refused_total
// until a slot frees), a finished job's series disappear FinishedTTL after
// its final progress, and a deleted job's at once.
package prom

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/schemas"
)

// Config are the Prometheus sink's settings.
type Config struct {
	// MaxJobs bounds the jobs exported; 0 means 10000.
	MaxJobs int `json:"max_jobs,omitempty"`
	// FinishedTTL is how long a finished job stays exported; 0 means 5m.
	FinishedTTL time.Duration `json:"finished_ttl,omitempty"`
}

// Defaults returns c with zero fields set to their defaults.
func (c Config) Defaults() Config {
	if c.MaxJobs == 0 {
		c.MaxJobs = 10000
	}
	if c.FinishedTTL == 0 {
		c.FinishedTTL = 5 * time.Minute
	}
	return c
}

// gauge is one pace_job_* gauge and how it reads a progress message; ok
// false leaves the series out.
type gauge struct {
	desc  *prometheus.Desc
	value func(p *schemas.Progress) (v float64, ok bool)
}

func always(f func(p *schemas.Progress) float64) func(p *schemas.Progress) (float64, bool) {
	return func(p *schemas.Progress) (float64, bool) { return f(p), true }
}

func streaming(f func(p *schemas.Progress) float64) func(p *schemas.Progress) (float64, bool) {
	return func(p *schemas.Progress) (float64, bool) { return f(p), p.Mode == schemas.Streaming }
}

func newGauge(name, help string, value func(p *schemas.Progress) (float64, bool)) gauge {
	return gauge{prometheus.NewDesc(name, help, []string{"job"}, nil), value}
}

// gauges are the exported metrics; docs/monitoring.md describes each.
var gauges = []gauge{
	newGauge("pace_job_progress_ratio", "Finished (done + dead) items / total items (Influx job_progress).",
		always(func(p *schemas.Progress) float64 { return p.JobProgress })),
	newGauge("pace_job_time_progress_ratio", "Elapsed / expected time; above 1 after the deadline (Influx time_progress).",
		always(func(p *schemas.Progress) float64 { return p.TimeProgress })),
	newGauge("pace_job_progress_error", "job progress - time progress; negative = late (Influx application_progress_error).",
		always(func(p *schemas.Progress) float64 { return p.Error })),
	newGauge("pace_job_replicas", "Live workers of the job (Influx job_parallelism).",
		always(func(p *schemas.Progress) float64 { return float64(p.Replicas) })),
	newGauge("pace_job_replicas_needed", "Replicas that finish the rest by the deadline at the measured per-replica rate.",
		func(p *schemas.Progress) (float64, bool) { return float64(p.ReplicasNeeded), p.ReplicasNeeded > 0 }),
	newGauge("pace_job_throughput_items_per_second", "Finished items per second over the smoothing window.",
		always(func(p *schemas.Progress) float64 { return p.Throughput })),
	newGauge("pace_job_replica_throughput_items_per_second", "Throughput per replica.",
		always(func(p *schemas.Progress) float64 { return p.PerReplica })),
	newGauge("pace_job_eta_seconds", "Estimated time left at the current throughput.",
		func(p *schemas.Progress) (float64, bool) {
			if p.ETA == nil {
				return 0, false
			}
			return p.ETA.D().Seconds(), true
		}),
	newGauge("pace_job_items_total", "Items of a batch job.",
		func(p *schemas.Progress) (float64, bool) { return float64(p.Total), p.Total > 0 }),
	newGauge("pace_job_items_done", "Items with a result.", always(func(p *schemas.Progress) float64 { return float64(p.Done) })),
	newGauge("pace_job_items_dead", "Dead-lettered items.", always(func(p *schemas.Progress) float64 { return float64(p.Dead) })),
	newGauge("pace_job_items_queued", "Items waiting in the main queue.",
		always(func(p *schemas.Progress) float64 { return float64(p.QueueLength) })),
	newGauge("pace_job_items_in_flight", "Items delivered to a worker and not yet acknowledged.",
		always(func(p *schemas.Progress) float64 { return float64(p.InFlight) })),
	newGauge("pace_job_items_redelivered", "Unacknowledged items delivered more than once.",
		always(func(p *schemas.Progress) float64 { return float64(p.Redeliveries) })),
	newGauge("pace_job_input_rate_items_per_second", "Streaming: items queued per second.",
		streaming(func(p *schemas.Progress) float64 { return p.InputRate })),
	newGauge("pace_job_output_rate_items_per_second", "Streaming: items finished per second.",
		streaming(func(p *schemas.Progress) float64 { return p.OutputRate })),
	newGauge("pace_job_backlog_items", "Streaming: items queued or in flight.",
		streaming(func(p *schemas.Progress) float64 { return float64(p.Backlog) })),
	newGauge("pace_job_lag_seconds", "Streaming: age of the oldest unfinished item.",
		streaming(func(p *schemas.Progress) float64 { return p.Lag.D().Seconds() })),
	newGauge("pace_job_cost_rate_per_hour", "Jobs with a cost: what the workers' use costs, in price units per hour.",
		func(p *schemas.Progress) (float64, bool) { return p.CostRate, p.CostRate > 0 || p.DesiredCost != nil }),
	newGauge("pace_job_cost_spent", "Jobs with a cost: what the job spent so far, in price units.",
		func(p *schemas.Progress) (float64, bool) { return p.Spent, p.CostRate > 0 || p.DesiredCost != nil }),
	newGauge("pace_job_last_sample_timestamp_seconds", "Unix time of the sample the values come from.",
		always(func(p *schemas.Progress) float64 { return float64(p.At.UnixNano()) / 1e9 })),
}

// Sink holds the latest progress of each job and is a prometheus.Collector.
// It is safe for concurrent use.
type Sink struct {
	cfg     Config
	clk     clock.PassiveClock
	refused prometheus.Counter

	mu   sync.Mutex
	jobs map[string]*entry // guarded by mu
}

type entry struct {
	p        *schemas.Progress
	finished time.Time // when its final progress arrived; zero while running
}

// Option configures a Sink.
type Option func(*Sink)

// WithClock sets the clock that ages finished jobs (default: the real one).
func WithClock(clk clock.PassiveClock) Option { return func(s *Sink) { s.clk = clk } }

// New returns a Prometheus sink.
func New(cfg Config, opts ...Option) *Sink {
	s := &Sink{cfg: cfg.Defaults(), clk: clock.RealClock{}, jobs: map[string]*entry{},
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_prom_jobs_refused_total",
			Help: "Progress messages not exported because MaxJobs jobs were exported already."})}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Write implements sink.Sink.
func (s *Sink) Write(p *schemas.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[p.Job]
	if !ok {
		s.expireLocked()
		if len(s.jobs) >= s.cfg.MaxJobs {
			s.refused.Inc()
			return
		}
		e = &entry{}
		s.jobs[p.Job] = e
	}
	if e.p != nil && p.At.Before(e.p.At) {
		return // an older message, e.g. replayed
	}
	e.p = p
	if p.State.Final() && p.State != "" && e.finished.IsZero() {
		e.finished = s.clk.Now()
	}
}

// Forget implements sink.Sink.
func (s *Sink) Forget(job string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, job)
}

// expireLocked drops finished jobs older than FinishedTTL.
func (s *Sink) expireLocked() {
	now := s.clk.Now()
	for job, e := range s.jobs {
		if !e.finished.IsZero() && now.Sub(e.finished) >= s.cfg.FinishedTTL {
			delete(s.jobs, job)
		}
	}
}

// Describe implements prometheus.Collector.
func (s *Sink) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range gauges {
		ch <- g.desc
	}
	s.refused.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Sink) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	s.expireLocked()
	latest := make([]*schemas.Progress, 0, len(s.jobs))
	for _, e := range s.jobs {
		latest = append(latest, e.p)
	}
	s.mu.Unlock()
	for _, p := range latest {
		for _, g := range gauges {
			if v, ok := g.value(p); ok {
				ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, p.Job)
			}
		}
	}
	s.refused.Collect(ch)
}
