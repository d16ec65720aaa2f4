package actuator

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
)

func init() {
	host.Register(host.Def{Name: "actuator", Short: "Turn scaling decisions into infrastructure requests",
		Long: `The actuator turns scaling decisions and job lifecycle events into
infrastructure requests on pace.k8s.requests, which the gate admits and
executes. It remembers the replicas last requested per job and runs on the
leader; a new leader first requests every running job's replicas again.`,
		Feeds: "gate",
		New:   func() host.Stage { return command{} }})
}

// command is the actuator as pace up and pace stage run it: no flags, the
// work on the leader.
type command struct{}

func (command) Flags(*pflag.FlagSet) {}
func (command) Validate() error      { return nil }

func (command) Wire(ctx context.Context, p host.Process) error {
	c, err := p.Client(ctx, "actuator")
	if err != nil {
		return err
	}
	return p.Lead("actuator", func() (func(context.Context) error, prometheus.Collector, error) {
		st, err := New(Deps{Bus: c}, Config{}, WithLogger(p.Logger()))
		if err != nil {
			return nil, nil, err
		}
		return st.Run, nil, nil
	})
}
