package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
	"github.com/pace-platform/pace/stages/actuator/local"
	"github.com/pace-platform/pace/stages/controller"
	"github.com/pace-platform/pace/stages/gate"
)

// controlFlags configure the control loop of `pace up`: the controller, the
// APF bus gate and the actuator.
type controlFlags struct {
	actuator string
	grace    time.Duration
	replicas int
}

func (f *controlFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.actuator, "actuator", "local", `runtime of the workers: "local" (processes on this machine) or "none" (decisions only)`)
	fs.DurationVar(&f.grace, "worker-grace", 30*time.Second, "time a local worker gets to finish its items when scaled down")
	fs.IntVar(&f.replicas, "max-local-replicas", 64, "most local worker processes per job")
}

func (f *controlFlags) validate(natsURL string) error {
	switch f.actuator {
	case "none":
	case "local":
		if natsURL == "" {
			return usageError(`--actuator local runs workers that connect over TCP: set --nats-listen (or --actuator none)`)
		}
	default:
		return usageError("--actuator %q: want local or none", f.actuator)
	}
	if f.grace < 0 || f.replicas < 1 {
		return usageError("--worker-grace must not be negative and --max-local-replicas must be >= 1")
	}
	return nil
}

// build returns the loops of the control plane: the controller stage and,
// with the local actuator, the actuator stage, the APF bus gate (sharing
// fcGate's configuration and seats) and the local runtime.
func (f *controlFlags) build(c *bus.Client, fcGate *apf.Gate, natsURL, logLevel string, log *slog.Logger) ([]func(context.Context) error, error) {
	ctl, err := controller.New(c, controller.Config{}, controller.Builtin(), log)
	if err != nil {
		return nil, err
	}
	loops := []func(context.Context) error{ctl.Run}
	if f.actuator == "none" {
		log.Info("no actuator: decisions are published, workers are not run")
		return loops, nil
	}
	rt, err := local.New(local.Config{NATSURL: natsURL, Grace: f.grace, MaxReplicas: f.replicas,
		Env: []string{"PACE_LOG_LEVEL=" + logLevel}}, log)
	if err != nil {
		return nil, err
	}
	gs, err := gate.New(c, fcGate, actuator.NewExecutor(c, map[string]actuator.Runtime{schemas.LocalActuator: actuator.Local(rt)}, log), gate.Config{}, log)
	if err != nil {
		return nil, err
	}
	return append(loops, rt.Run, gs.Run, actuator.New(c, log).Run), nil
}
