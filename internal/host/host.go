// Package host is how a process runs Pace's stages: the registry each stage
// package adds itself to (Register, from its init), and the Process through
// which a stage reaches what the process it runs in shares — its bus
// connection, logger, metrics registry, the loops every replica runs and the
// work only the stage's leader runs.
//
// pace up wires every registered stage into one process; pace stage NAME
// wires one. A stage that talks only to the bus is one package that calls
// Register; the stages that compose others (the manager with the job API and
// its APF gate, the gate with the actuation targets, the visualizer with the
// manager's job list) are composed by cmd/pace, which owns what they share.
package host

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/registry"
	"github.com/pace-platform/pace/internal/runner"
)

// Def describes a stage to the commands that run it.
type Def struct {
	// Name is the stage's name: pace stage NAME, its leader election, its
	// NATS user.
	Name string
	// Short and Long are its help.
	Short, Long string
	// New makes an instance of the stage for one command: its flags, then
	// its wiring into the process.
	New func() Stage
}

// Stage is one stage as a command sets it up: it registers its own flags,
// checks them before anything connects, then adds its work to a process.
type Stage interface {
	// Flags registers the stage's own flags.
	Flags(fs *pflag.FlagSet)
	// Validate checks them; its error names the flag at fault.
	Validate() error
	// Wire adds the stage's loops and leader work to p.
	Wire(ctx context.Context, p Process) error
}

// Process is what a process offers the stages it runs.
type Process interface {
	// Client returns the connection stage talks to the bus with: its own
	// NATS user where the bus authenticates stages.
	Client(ctx context.Context, stage string) (*bus.Client, error)
	// Logger is the process's logger.
	Logger() *slog.Logger
	// Register adds collectors to the process's /metrics.
	Register(cs ...prometheus.Collector)
	// Go runs loop on every replica, again after a temporary failure.
	Go(loop runner.Loop)
	// Lead runs the work build makes on the stage's leader, built anew for
	// each term; build is called once at once, so that a bad setting fails
	// at start.
	Lead(stage string, build runner.Build) error
}

var defs registry.Registry[Def]

// Register adds a stage. It panics on a second stage of the same name or a
// Def without a name or New, as a package's init would.
func Register(d Def) {
	if d.New == nil {
		panic(fmt.Sprintf("host.Register: stage %q has no New", d.Name))
	}
	defs.Add("stage", d.Name, d)
}

// Defs returns the registered stages by name.
func Defs() []Def { return defs.All() }
