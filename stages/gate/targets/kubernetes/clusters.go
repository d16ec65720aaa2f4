package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// ClusterReader reads the registered clusters (the manager's clusters
// bucket): the one a job names, or the active one for a job that names
// none (nil when none is active).
type ClusterReader interface {
	ClusterFor(ctx context.Context, name string) (*schemas.Cluster, uint64, error)
}

// Clusters runs each job on its cluster: the registered cluster its spec
// names (actuator.cluster, Asperathos' cluster_name), else the active
// registered cluster, else the default one (the gate's own kubeconfig).
// Each registered cluster gets its own client, built from its kubeconfig
// and rebuilt when its registration changes. It is safe for concurrent use.
type Clusters struct {
	def  *Runtime
	read ClusterReader
	cfg  Config
	log  *slog.Logger

	mu    sync.Mutex
	known map[string]registered // by cluster name
}

type registered struct {
	rev uint64
	rt  *Runtime
}

// NewClusters returns the router; def runs the jobs of no registered
// cluster, with cfg for the others too.
func NewClusters(def *Runtime, read ClusterReader, cfg Config, opts ...Option) *Clusters {
	return &Clusters{def: def, read: read, cfg: cfg, log: logger(opts), known: map[string]registered{}}
}

// ErrNoCluster wraps the error of a job whose cluster cannot be used.
var ErrNoCluster = errors.New("cluster unusable")

// runtime returns the runtime of rec's cluster.
func (c *Clusters) runtime(ctx context.Context, rec *schemas.JobRecord) (*Runtime, error) {
	cl, rev, err := c.read.ClusterFor(ctx, rec.Spec.Actuator.Cluster)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoCluster, rec.Spec.Actuator.Cluster, err)
	}
	if cl == nil {
		return c.def, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.known[cl.Name]; ok && r.rev == rev {
		return r.rt, nil
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(cl.Config))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: its kubeconfig: %w", ErrNoCluster, cl.Name, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoCluster, cl.Name, err)
	}
	rt, err := New(cs, c.cfg, WithLogger(c.log.With("cluster", cl.Name)))
	if err != nil {
		return nil, err
	}
	c.known[cl.Name] = registered{rev: rev, rt: rt}
	c.log.Info("registered cluster in use", "cluster", cl.Name, "server", rc.Host, "revision", rev)
	return rt, nil
}

// Scale scales rec's workers on its cluster.
func (c *Clusters) Scale(ctx context.Context, rec *schemas.JobRecord, replicas int) (int, error) {
	rt, err := c.runtime(ctx, rec)
	if err != nil {
		return 0, err
	}
	return rt.Scale(ctx, rec, replicas)
}

// Terminate removes rec's workers from its cluster.
func (c *Clusters) Terminate(ctx context.Context, rec *schemas.JobRecord) error {
	rt, err := c.runtime(ctx, rec)
	if err != nil {
		return err
	}
	return rt.Terminate(ctx, rec)
}

// Running counts rec's running pods on its cluster.
func (c *Clusters) Running(ctx context.Context, rec *schemas.JobRecord) (int, error) {
	rt, err := c.runtime(ctx, rec)
	if err != nil {
		return 0, err
	}
	return rt.Running(ctx, rec)
}

// Meter measures the metered jobs of every cluster in use.
func (c *Clusters) Meter(ctx context.Context) []targets.Use {
	c.mu.Lock()
	rts := []*Runtime{c.def}
	for _, name := range slices.Sorted(maps.Keys(c.known)) {
		rts = append(rts, c.known[name].rt)
	}
	c.mu.Unlock()
	var out []targets.Use
	for _, rt := range rts {
		out = append(out, rt.Meter(ctx)...)
	}
	return out
}
