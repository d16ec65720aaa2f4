package kubernetes

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/stages/gate/targets"
)

// PodCheckEvery is how often the target looks at its jobs' pods: it
// announces the running ones' presence (refreshed as often as a worker
// refreshes its own) and applies the failure policy's pods rule.
const PodCheckEvery = 5 * time.Second

// Opener returns the opener of the Kubernetes target: each job's workers
// as a batch/v1 Job on the cluster the job names (a cluster registered on
// the bus), else on def's, configured by cfg. Its loop watches the jobs'
// pods every PodCheckEvery: their output goes to the jobs' logs and a
// failed worker container is an exit, as a local worker's is.
func Opener(def *Runtime, cfg Config) targets.Opener {
	return func(env targets.Env) (targets.Target, error) {
		clusters := NewClusters(def, env.Bus, cfg, WithLogger(env.Log))
		watch := clusters.Watch(OnBus(env.Bus), env.Output, PodCheckEvery, clock.RealClock{}).ReportExits(env.Exited)
		return targets.Target{Runtime: clusters, Meter: clusters.Meter, Loops: []func(context.Context) error{watch.Run}}, nil
	}
}
