package processor

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
)

func init() {
	host.Register(host.Def{Name: "processor", Short: "Turn raw samples into job progress",
		Long: `The processor turns raw samples into progress (rates, expected finish,
error against the deadline) on pace.metrics.<job>.progress. It keeps each
job's rate window in memory and runs on the leader.`,
		New: func() host.Stage { return command{} }})
}

// command is the processor as pace up and pace stage run it: no flags, the
// work on the leader.
type command struct{}

func (command) Flags(*pflag.FlagSet) {}
func (command) Validate() error      { return nil }

func (command) Wire(ctx context.Context, p host.Process) error {
	c, err := p.Client(ctx, "processor")
	if err != nil {
		return err
	}
	return p.Lead("processor", func() (func(context.Context) error, prometheus.Collector, error) {
		proc, err := New(Deps{Bus: c}, Config{}, WithLogger(p.Logger()))
		if err != nil {
			return nil, nil, err
		}
		return proc.Run, proc.Metrics(), nil
	})
}
