package actuator

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator/local"
)

// UsageInterval is how often the use of jobs with a cost is measured, as
// Asperathos' kubejobs_cost monitor did.
const UsageInterval = 2 * time.Second

// UsageReporter publishes, every UsageInterval, what the local runtime's
// metered jobs (jobs with a cost) use, on pace.metrics.<job>.usage, where
// the processor prices it. Jobs without a cost are never measured.
type UsageReporter struct {
	c       *bus.Client
	measure func() []local.Use
	clk     clock.WithTicker
	log     *slog.Logger
	last    map[string]measured // the previous measure, by job
}

type measured struct {
	at  time.Time
	cpu float64
}

// NewUsageReporter returns a reporter of measure (local.Runtime.Measure)
// publishing with c; call Run.
func NewUsageReporter(c *bus.Client, measure func() []local.Use, clk clock.WithTicker, log *slog.Logger) *UsageReporter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &UsageReporter{c: c, measure: measure, clk: clk, log: log.With("stage", "usage"), last: map[string]measured{}}
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

// report publishes one usage message per metered job. CPU is the CPU time
// used since the previous measure over the time between them; a job's first
// measure sets the baseline and is not published.
func (u *UsageReporter) report(ctx context.Context) {
	now := u.clk.Now()
	seen := map[string]measured{}
	for _, use := range u.measure() {
		seen[use.Job] = measured{at: now, cpu: use.CPUSeconds}
		prev, ok := u.last[use.Job]
		if !ok || !now.After(prev.at) {
			continue
		}
		// Replicas that exited take their CPU time with them: never below 0.
		cores := max(0, (use.CPUSeconds-prev.cpu)/now.Sub(prev.at).Seconds())
		m := &schemas.Usage{Job: use.Job, At: now, CPUCores: cores, MemoryBytes: use.MemoryBytes,
			Replicas: use.Replicas, Source: "local"}
		msg, err := bus.NewMsg(ctx, u.c.Prefix().Metrics(use.Job, schemas.UsageMetrics), m)
		if err == nil {
			_, err = u.c.JetStream().PublishMsg(ctx, msg)
		}
		if err != nil {
			u.log.Warn("usage not published", "job", use.Job, "err", err)
		}
	}
	u.last = seen
}
