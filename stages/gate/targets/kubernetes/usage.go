package kubernetes

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// meter remembers the jobs with a cost the runtime scaled, by namespace, so
// that Meter measures them alone.
func (r *Runtime) meter(rec *schemas.JobRecord, replicas int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Spec.Cost == nil || replicas == 0 {
		delete(r.metered, rec.ID)
		return
	}
	r.metered[rec.ID] = namespace(rec)
}

// podMetrics is the part of metrics.k8s.io/v1beta1's PodMetricsList the
// meter reads (the API's Go types live in k8s.io/metrics, which Pace does
// not depend on for two fields).
type podMetrics struct {
	Items []struct {
		Containers []struct {
			Usage map[string]string `json:"usage"`
		} `json:"containers"`
	} `json:"items"`
}

// Meter measures the pods of the jobs with a cost from the metrics API
// (metrics.k8s.io, served by metrics-server): their containers' CPU and
// working-set memory, summed per job. A job whose pods have no metrics yet,
// or a cluster without the API, is skipped and logged.
func (r *Runtime) Meter(ctx context.Context) []targets.Use {
	r.mu.Lock()
	jobs := maps.Clone(r.metered)
	r.mu.Unlock()
	var out []targets.Use
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		raw, err := r.cs.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", jobs[job], "pods").
			Param("labelSelector", LabelJob+"="+job).DoRaw(ctx)
		if err != nil {
			r.log.Warn("pod metrics unavailable (is metrics-server installed?)", "job", job, "err", err)
			continue
		}
		var pm podMetrics
		if err := json.Unmarshal(raw, &pm); err != nil {
			r.log.Warn("pod metrics unreadable", "job", job, "err", err)
			continue
		}
		use := targets.Use{Job: job, Replicas: len(pm.Items), Source: "metrics-api"}
		for _, pod := range pm.Items {
			for _, c := range pod.Containers {
				if q, err := resource.ParseQuantity(c.Usage["cpu"]); err == nil {
					use.CPU += q.AsApproximateFloat64()
				}
				if q, err := resource.ParseQuantity(c.Usage["memory"]); err == nil {
					use.MemoryBytes += q.Value()
				}
			}
		}
		out = append(out, use)
	}
	return out
}
