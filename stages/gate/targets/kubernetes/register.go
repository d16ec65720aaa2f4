package kubernetes

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

func init() {
	targets.Register(targets.Def{Name: schemas.KubernetesActuator,
		New: func() targets.Command { return &command{} }})
}

// command is the Kubernetes target as the gate's process sets it up.
type command struct {
	enabled    bool
	kubeconfig string
	podNATSURL string
	// workerSecret and workerSecretKeys give worker pods their NATS
	// credentials (Config).
	workerSecret     string
	workerSecretKeys []string
}

func (c *command) Flags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.enabled, "kubernetes", false, "also run jobs whose actuator is kubernetes, as batch/v1 Jobs (kubeconfig by --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file for --kubernetes (default: the standard loading rules)")
	fs.StringVar(&c.podNATSURL, "pod-nats-url", "", "NATS URL given to worker pods (default: the URL local workers get)")
	fs.StringVar(&c.workerSecret, "kube-worker-secret", "", "Secret in each job's namespace with the worker pods' NATS credentials and CA (keys: --kube-worker-secret-keys); pods reference it, the gate never reads it")
	fs.StringSliceVar(&c.workerSecretKeys, "kube-worker-secret-keys", nil, fmt.Sprintf(
		"keys of --kube-worker-secret, among %s (default %s)", secretKeyNames(), strings.Join(DefaultWorkerSecretKeys(), ",")))
}

// secretKeyNames lists the keys a worker Secret may hold and the variable
// each one sets.
func secretKeyNames() string {
	keys := SecretKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Key + " (" + k.Env + ")"
	}
	return strings.Join(names, ", ")
}

func (c *command) Enabled() bool { return c.enabled }

// Secrets are the kubeconfigs the standard loading rules would read.
func (c *command) Secrets() []string {
	var files []string
	for _, p := range []string{c.kubeconfig, os.Getenv("KUBECONFIG"), clientcmd.RecommendedHomeFile} {
		if p != "" {
			files = append(files, p)
		}
	}
	return files
}

// flags names the flag of each field of Config.
var flags = map[string]string{"nats_url": "--pod-nats-url", "worker_secret": "--kube-worker-secret",
	"worker_secret_keys": "--kube-worker-secret-keys", "redis_addr": "--pod-redis-addr"}

// config is the runtime's configuration; w.NATSURL is the URL local
// workers get.
func (c *command) config(w targets.Workers) Config {
	url := w.NATSURL
	if c.podNATSURL != "" {
		url = c.podNATSURL
	}
	return Config{NATSURL: url, WorkerSecret: c.workerSecret, WorkerSecretKeys: c.workerSecretKeys,
		JobToken: w.JobToken, RedisAddr: w.RedisAddr}
}

// Validate checks the target's flags, naming each bad one.
func (c *command) Validate(w targets.Workers) error {
	if !c.enabled {
		if c.podNATSURL != "" || w.RedisAddr != "" || c.workerSecret != "" || len(c.workerSecretKeys) > 0 {
			return errors.New("--pod-nats-url, --pod-redis-addr, --kube-worker-secret and --kube-worker-secret-keys need --kubernetes")
		}
		return nil
	}
	if c.workerSecret == "" && len(c.workerSecretKeys) > 0 {
		return errors.New("--kube-worker-secret-keys needs --kube-worker-secret")
	}
	errs := c.config(w).Validate()
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		name, _, _ := strings.Cut(e.Field, "[")
		msgs[i] = flags[name] + ": " + e.ErrorBody()
		if name == "nats_url" && c.podNATSURL == "" {
			msgs[i] += " (it defaults to the URL local workers get)"
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Opener connects to the cluster of the kubeconfig (or the one Pace runs
// in): the cluster of jobs that name none.
func (c *command) Opener(w targets.Workers, log *slog.Logger) (targets.Opener, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubernetes: no usable kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("--kubernetes: %w", err)
	}
	cfg := c.config(w)
	rt, err := New(cs, cfg, WithLogger(log))
	if err != nil {
		return nil, err
	}
	log.Info("kubernetes actuator enabled", "server", rc.Host, "worker_secret", c.workerSecret)
	return Opener(rt, cfg), nil
}
