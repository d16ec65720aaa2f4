package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	kubeactuator "github.com/pace-platform/pace/stages/actuator/kubernetes"
	"github.com/pace-platform/pace/stages/actuator/local"
)

// controlFlags configure the runtimes of the gate stage, which executes the
// infrastructure requests APF admits (pace up and pace stage gate).
type controlFlags struct {
	actuator   string
	grace      time.Duration
	replicas   int
	kubeconfig string
	podNATSURL string
	kubernetes bool
	// workerSecret and workerSecretKeys give worker pods their NATS
	// credentials (kubeactuator.Config).
	workerSecret     string
	workerSecretKeys []string
	// redisListen is the Redis front's address (docs/asperathos.md);
	// podRedisAddr is where worker pods reach it.
	redisListen, podRedisAddr string
	// jobToken mints a job's worker token for its pods when the bus
	// authenticates tenants (pace up --token-file); nil otherwise.
	jobToken func(job string) string
	// unsandboxed runs local workers as Pace's own user, without a
	// sandbox (--local-exec-unsandboxed).
	unsandboxed bool
}

func (f *controlFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.actuator, "actuator", "local", `runtime of the workers: "local" (processes on this machine) or "none" (no local workers; without --kubernetes, decisions only)`)
	fs.DurationVar(&f.grace, "worker-grace", 30*time.Second, "time a local worker gets to finish its items when scaled down")
	fs.IntVar(&f.replicas, "max-local-replicas", 64, "most local worker processes per job")
	fs.BoolVar(&f.unsandboxed, "local-exec-unsandboxed", false, "run local workers as Pace's own user, able to read what Pace can, instead of sandboxed (a user per job, own PID and mount namespaces, Pace's files hidden; docs/security.md): for machines that allow no sandbox")
	fs.BoolVar(&f.kubernetes, "kubernetes", false, "also run jobs whose actuator is kubernetes, as batch/v1 Jobs (kubeconfig by --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for --kubernetes (default: the standard loading rules)")
	fs.StringVar(&f.podNATSURL, "pod-nats-url", "", "NATS URL given to worker pods (default: the URL local workers get)")
	fs.StringVar(&f.redisListen, "redis-listen", "127.0.0.1:0", `listen address of the Redis front, where Asperathos workers read their job's queue (port 0: any free port; "" = none; docs/asperathos.md)`)
	fs.StringVar(&f.podRedisAddr, "pod-redis-addr", "", `host:port of the Redis front that worker pods reach, e.g. pace-redis.pace.svc:6379 ("" = pods get no REDIS_HOST)`)
	fs.StringVar(&f.workerSecret, "kube-worker-secret", "", "Secret in each job's namespace with the worker pods' NATS credentials and CA (keys: --kube-worker-secret-keys); pods reference it, the gate never reads it")
	fs.StringSliceVar(&f.workerSecretKeys, "kube-worker-secret-keys", nil, fmt.Sprintf(
		"keys of --kube-worker-secret, among %s (default %s)", secretKeyNames(), strings.Join(kubeactuator.DefaultWorkerSecretKeys(), ",")))
}

// secretKeyNames lists the keys a worker Secret may hold and the variable
// each one sets.
func secretKeyNames() string {
	keys := kubeactuator.SecretKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Key + " (" + k.Env + ")"
	}
	return strings.Join(names, ", ")
}

// kubeFlags names the flag of each field of kubeactuator.Config.
var kubeFlags = map[string]string{"nats_url": "--pod-nats-url", "worker_secret": "--kube-worker-secret",
	"worker_secret_keys": "--kube-worker-secret-keys", "redis_addr": "--pod-redis-addr"}

// kubeConfig is the Kubernetes runtime's configuration; natsURL is the URL
// local workers get.
func (f *controlFlags) kubeConfig(natsURL string) kubeactuator.Config {
	if f.podNATSURL != "" {
		natsURL = f.podNATSURL
	}
	return kubeactuator.Config{NATSURL: natsURL, WorkerSecret: f.workerSecret, WorkerSecretKeys: f.workerSecretKeys,
		JobToken: f.jobToken, RedisAddr: f.podRedisAddr}
}

// validateKube checks the flags of the Kubernetes runtime, naming each bad
// flag.
func (f *controlFlags) validateKube(natsURL string) error {
	if !f.kubernetes {
		if f.podNATSURL != "" || f.podRedisAddr != "" || f.workerSecret != "" || len(f.workerSecretKeys) > 0 {
			return usageError("--pod-nats-url, --pod-redis-addr, --kube-worker-secret and --kube-worker-secret-keys need --kubernetes")
		}
		return nil
	}
	if f.workerSecret == "" && len(f.workerSecretKeys) > 0 {
		return usageError("--kube-worker-secret-keys needs --kube-worker-secret")
	}
	errs := f.kubeConfig(natsURL).Validate()
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		name, _, _ := strings.Cut(e.Field, "[")
		msgs[i] = kubeFlags[name] + ": " + e.ErrorBody()
		if name == "nats_url" && f.podNATSURL == "" {
			msgs[i] += " (it defaults to the URL local workers get)"
		}
	}
	return usageError("%s", strings.Join(msgs, "; "))
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
	if f.grace < 0 {
		return usageError("--worker-grace %s: must not be negative", f.grace)
	}
	if f.replicas < 1 {
		return usageError("--max-local-replicas %d: must be at least 1", f.replicas)
	}
	return f.validateKube(natsURL)
}

// localConfig is the local target's configuration: workers that connect
// to natsURL with the extra environment env, and jobEnv's for their job
// (nil: none) or, for Redis workers, redisEnv's, sandboxed and hidden from
// the paths in hide (Pace's data and secret files) unless
// --local-exec-unsandboxed.
func (f *controlFlags) localConfig(natsURL string, env []string, jobEnv, redisEnv func(job string) []string, hide []string) local.Config {
	cfg := local.Config{NATSURL: natsURL, Grace: f.grace, MaxReplicas: f.replicas, Env: env, JobEnv: jobEnv, RedisEnv: redisEnv}
	if !f.unsandboxed {
		cfg.Sandbox = &local.Sandbox{Hide: hide}
	}
	return cfg
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
	rt, err := kubeactuator.New(cs, f.kubeConfig(natsURL), kubeactuator.WithLogger(log))
	if err != nil {
		return nil, usageError("%v", err)
	}
	log.Info("kubernetes actuator enabled", "server", cfg.Host, "worker_secret", f.workerSecret)
	return rt, nil
}
