package local

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

func init() {
	targets.Register(targets.Def{Name: schemas.LocalActuator,
		New: func() targets.Command { return &command{} }})
}

// command is the local target as the gate's process sets it up.
type command struct {
	actuator    string
	grace       time.Duration
	replicas    int
	unsandboxed bool
}

func (c *command) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.actuator, "actuator", "local", `runtime of the workers: "local" (processes on this machine) or "none" (no local workers; without --kubernetes, decisions only)`)
	fs.DurationVar(&c.grace, "worker-grace", 30*time.Second, "time a local worker gets to finish its items when scaled down")
	fs.IntVar(&c.replicas, "max-local-replicas", 64, "most local worker processes per job")
	fs.BoolVar(&c.unsandboxed, "local-exec-unsandboxed", false, "run local workers as Pace's own user, able to read what Pace can, instead of sandboxed (a user per job, own PID and mount namespaces, Pace's files hidden; docs/security.md): for machines that allow no sandbox")
}

func (c *command) Enabled() bool     { return c.actuator == "local" }
func (c *command) Secrets() []string { return nil }

// MaxReplicas is the most workers of one job the target runs.
func (c *command) MaxReplicas() int { return c.replicas }

func (c *command) Validate(w targets.Workers) error {
	switch c.actuator {
	case "none":
	case "local":
		if w.NATSURL == "" {
			return errors.New(`--actuator local runs workers that connect over TCP: set --nats-listen (or --actuator none)`)
		}
	default:
		return fmt.Errorf("--actuator %q: want local or none", c.actuator)
	}
	if c.grace < 0 {
		return fmt.Errorf("--worker-grace %s: must not be negative", c.grace)
	}
	if c.replicas < 1 {
		return fmt.Errorf("--max-local-replicas %d: must be at least 1", c.replicas)
	}
	return nil
}

// Opener runs workers that connect to w.NATSURL with w's environments,
// sandboxed and hidden from w.Hide unless --local-exec-unsandboxed.
func (c *command) Opener(w targets.Workers, _ *slog.Logger) (targets.Opener, error) {
	cfg := Config{NATSURL: w.NATSURL, Grace: c.grace, MaxReplicas: c.replicas, Env: w.Env, JobEnv: w.JobEnv, RedisEnv: w.RedisEnv}
	if !c.unsandboxed {
		cfg.Sandbox = &Sandbox{Hide: w.Hide}
	}
	return Opener(cfg), nil
}
