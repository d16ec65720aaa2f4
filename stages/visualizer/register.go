package visualizer

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
)

func init() {
	host.Register(host.Def{Name: "visualizer", Short: "Serve the web UI",
		Long: `The visualizer serves the web UI under /ui/ on every replica: job lists,
job pages with progress, events and logs. Its commands go to the job API.
Its flow-control page (/ui/flowcontrol, admins only with --token-file)
gathers the APF state of the gate's leader and of every manager replica,
which answer on pace.flowcontrol.dump.`,
		Uses: host.UsesAuthentication,
		New:  func() host.Stage { return command{} }})
}

// command is the visualizer as pace up and pace stage run it: no flags of
// its own, the UI on every replica.
type command struct{}

func (command) Flags(*pflag.FlagSet) {}
func (command) Validate() error      { return nil }

// Wire serves the UI outside APF (its commands go through the API). Its
// flow-control page reads the process's APF gate when it has one (pace up),
// else asks the gate's and the managers' processes over NATS.
func (command) Wire(ctx context.Context, p host.Process) error {
	sh := p.Shared()
	client, err := p.Client(ctx, "visualizer")
	if err != nil {
		return err
	}
	ui, err := New(Deps{Bus: client}, Config{Open: sh.Authenticator == nil, TraceURL: sh.TraceURL}, WithLogger(p.Logger()))
	if err != nil {
		return err
	}
	if sh.FlowControl != nil {
		ui.SetFlowControl(sh.FlowControl)
	} else {
		ui.SetRemoteFlowControl(client)
	}
	ui.Register(sh.UI)
	p.Register(ui.Metrics())
	p.Go(ui.Run) // one reader of the job events wakes every stream
	return nil
}
