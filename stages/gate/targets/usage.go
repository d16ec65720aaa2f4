package targets

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// UsageInterval is how often the use of jobs with a cost is measured, as
// Asperathos' kubejobs_cost monitor did.
const UsageInterval = 2 * time.Second

// Use is what one job's workers use at a moment. CPU is cumulative CPU
// seconds when Cumulative (processes), else the vCPUs in use (the metrics
// API's pods).
type Use struct {
	Job         string
	CPU         float64
	Cumulative  bool
	MemoryBytes int64
	Replicas    int
	Source      string
}

// Meter measures the jobs with a cost of one runtime.
type Meter func(ctx context.Context) []Use

// UsageReporter publishes, every UsageInterval, what the metered jobs (jobs
// with a cost) of its runtimes use, on pace.metrics.<job>.usage, where the
// processor prices it. Jobs without a cost are never measured.
type UsageReporter struct {
	c      *bus.Client
	meters []Meter
	clk    clock.WithTicker
	log    *slog.Logger
	last   map[string]measured // the previous cumulative measure, by job
}

type measured struct {
	at  time.Time
	cpu float64
}

// NewUsageReporter returns a reporter of meters publishing with c; call Run.
func NewUsageReporter(c *bus.Client, meters []Meter, opts ...Option) *UsageReporter {
	o := apply("usage", opts)
	return &UsageReporter{c: c, meters: meters, clk: o.clk, log: o.log, last: map[string]measured{}}
}

// Run measures and publishes until ctx ends.
func (u *UsageReporter) Run(ctx context.Context) error {
	t := u.clk.NewTicker(UsageInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			u.report(ctx)
		}
	}
}

// report publishes one usage message per metered job. Cumulative CPU is
// turned into vCPUs over the time since the previous measure; a job's first
// such measure sets the baseline and is not published.
func (u *UsageReporter) report(ctx context.Context) {
	now := u.clk.Now()
	seen := map[string]measured{}
	for _, meter := range u.meters {
		for _, use := range meter(ctx) {
			cores := use.CPU
			if use.Cumulative {
				seen[use.Job] = measured{at: now, cpu: use.CPU}
				prev, ok := u.last[use.Job]
				if !ok || !now.After(prev.at) {
					continue
				}
				// Replicas that exited take their CPU time with them: never below 0.
				cores = max(0, (use.CPU-prev.cpu)/now.Sub(prev.at).Seconds())
			}
			u.publish(ctx, &schemas.Usage{Job: use.Job, At: now, CPUCores: cores, MemoryBytes: use.MemoryBytes,
				Replicas: use.Replicas, Source: use.Source})
		}
	}
	u.last = seen
}

func (u *UsageReporter) publish(ctx context.Context, m *schemas.Usage) {
	if err := u.c.Publish(ctx, u.c.Prefix().Metrics(m.Job, schemas.UsageMetrics), m, ""); err != nil {
		u.log.Warn("usage not published", "job", m.Job, "err", err)
	}
}
