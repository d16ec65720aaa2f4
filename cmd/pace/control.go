package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/actuator"
	kubeactuator "github.com/pace-platform/pace/stages/actuator/kubernetes"
	"github.com/pace-platform/pace/stages/actuator/local"
	"github.com/pace-platform/pace/stages/controller"
	"github.com/pace-platform/pace/stages/gate"
)

// controlFlags configure the control loop of `pace up`: the controller, the
// APF bus gate and the actuator.
type controlFlags struct {
	actuator   string
	grace      time.Duration
	replicas   int
	kubeconfig string
	podNATSURL string
	kubernetes bool
}

func (f *controlFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.actuator, "actuator", "local", `runtime of the workers: "local" (processes on this machine) or "none" (decisions only)`)
	fs.DurationVar(&f.grace, "worker-grace", 30*time.Second, "time a local worker gets to finish its items when scaled down")
	fs.IntVar(&f.replicas, "max-local-replicas", 64, "most local worker processes per job")
	fs.BoolVar(&f.kubernetes, "kubernetes", false, "also run jobs whose actuator is kubernetes, as batch/v1 Jobs (kubeconfig by --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for --kubernetes (default: the standard loading rules)")
	fs.StringVar(&f.podNATSURL, "pod-nats-url", "", "NATS URL given to worker pods (default: the URL pace up prints)")
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
	runtimes := map[string]actuator.Runtime{}
	if f.kubernetes {
		krt, err := f.kubernetesRuntime(natsURL, log)
		if err != nil {
			return nil, err
		}
		runtimes[schemas.KubernetesActuator] = krt
	}
	rt, err := local.New(local.Config{NATSURL: natsURL, Grace: f.grace, MaxReplicas: f.replicas,
		Env: []string{"PACE_LOG_LEVEL=" + logLevel}}, log)
	if err != nil {
		return nil, err
	}
	runtimes[schemas.LocalActuator] = actuator.Local(rt)
	gs, err := gate.New(c, fcGate, actuator.NewExecutor(c, runtimes, log), gate.Config{}, log)
	if err != nil {
		return nil, err
	}
	return append(loops, rt.Run, gs.Run, actuator.New(c, log).Run), nil
}

// kubernetesRuntime connects to the cluster of the kubeconfig (or the one
// Pace runs in) and returns the Kubernetes runtime.
func (f *controlFlags) kubernetesRuntime(natsURL string, log *slog.Logger) (*kubeactuator.Runtime, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, usageError("--kubernetes: no usable kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubernetes: %w", err)
	}
	if f.podNATSURL != "" {
		natsURL = f.podNATSURL
	}
	log.Info("kubernetes actuator enabled", "server", cfg.Host)
	return kubeactuator.New(cs, natsURL, log), nil
}
