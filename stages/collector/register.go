package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
)

func init() {
	host.Register(host.Def{Name: "collector", Short: "Sample every running job's queue and workers",
		Long: `The collector samples each running job (queue depth, results, workers)
every --sample-interval and on job events, and publishes raw samples on
pace.metrics.<job>.raw. It runs on the leader.`,
		New: func() host.Stage { return &command{} }})
}

// command is the collector as pace up and pace stage run it.
type command struct{ interval time.Duration }

func (s *command) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&s.interval, "sample-interval", time.Second, "how often every running job is sampled (also on job events and queue activity)")
}

func (s *command) Validate() error {
	if s.interval < 10*time.Millisecond {
		return fmt.Errorf("--sample-interval %s: must be at least 10ms", s.interval)
	}
	return nil
}

// Wire samples running jobs on the leader; every replica keeps worker
// presence warm for a fast takeover.
func (s *command) Wire(ctx context.Context, p host.Process) error {
	c, err := p.Client(ctx, "collector")
	if err != nil {
		return err
	}
	presence := c.Workers().Presence(nil)
	p.Go(presence.Run)
	return p.Lead("collector", func() (func(context.Context) error, prometheus.Collector, error) {
		col, err := New(Deps{Bus: c}, Config{Interval: s.interval}, WithReplicas(presence), WithLogger(p.Logger()))
		if err != nil {
			return nil, nil, fmt.Errorf("collector: %w", err)
		}
		return col.Run, col.Metrics(), nil
	})
}
