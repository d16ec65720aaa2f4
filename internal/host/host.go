// Package host is how a process runs Pace's stages: the registry each stage
// package adds itself to (Register, from its init), and the Process through
// which a stage reaches what the process it runs in shares — its bus
// connection, logger, metrics registry, the loops every replica runs and the
// work only the stage's leader runs.
//
// pace up wires every registered stage into one process; pace stage NAME
// wires one. Every stage is one package that calls Register. What the stages
// of one process share beyond the bus — its HTTP server, its APF gate, who
// its callers are, where the workers it starts reach the bus — is the
// process's (Shared): a stage names the services it uses (Def.Uses), and the
// command registers their flags and builds them once.
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
	// Uses are the process's services the stage needs.
	Uses Uses
	// Feeds names the stage that consumes what this one produces when this
	// one is of no use without it: pace up leaves both out together.
	Feeds string
}

// Uses is a set of services a process shares among its stages.
type Uses uint

const (
	// UsesFlowControl is the process's APF gate (Shared.FlowControl): its
	// seats, limits and policy flags.
	UsesFlowControl Uses = 1 << iota
	// UsesAuthentication is who the callers of the process's HTTP server
	// are (Shared.Authenticator): --token-file and the rest of the chain.
	UsesAuthentication
	// UsesJobTokens are the tokens of jobs' workers (Shared.Workers'
	// JobToken): --job-token-key.
	UsesJobTokens
	// UsesCallout runs, in the stage's process, the authorization service
	// of the NATS servers' auth callout, which admits tenants by their
	// --token-file token and workers by their job token
	// (--nats-callout-key).
	UsesCallout
)

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
	// Shared is what the process's stages share beyond the bus.
	Shared() *Shared
}

// Provider is a stage that checks its flags against what the process
// knows before it starts (s.Workers.NATSURL) and sets up, before anything
// connects, what other stages read from s (the gate: where the Redis front
// listens, how many local workers a job may have). Its error names the flag
// at fault.
type Provider interface {
	Provide(s *Shared) error
}

// Idler is a stage whose flags may leave it nothing to do (the gate without
// a target): Idle says why. pace up then runs without it and the stages
// that feed it; pace stage refuses to start it.
type Idler interface {
	Idle() error
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
