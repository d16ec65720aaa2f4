package kubernetes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

// The meter reads the metrics API's pod metrics of the jobs with a cost
// alone, by their label, and sums their containers. The API is served here
// by a stand-in (a cluster needs metrics-server for it);
// TestMetricsAPIAbsentMeasuresNothing in package integration runs the same
// code against a real kube-apiserver without it.
func TestMeterSumsPodMetricsOfJobsWithACost(t *testing.T) {
	var asked []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.Query().Get("labelSelector"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": [
			{"metadata": {"name": "p1"}, "containers": [{"name": "worker", "usage": {"cpu": "250m", "memory": "100Mi"}}]},
			{"metadata": {"name": "p2"}, "containers": [{"name": "worker", "usage": {"cpu": "1500000n", "memory": "1Gi"}}]}]}`))
	}))
	defer api.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cs, Config{NATSURL: "nats://n:4222"})
	if err != nil {
		t.Fatal(err)
	}
	cost := &schemas.JobRecord{ID: "priced", Spec: schemas.JobSpec{Cost: &schemas.CostSpec{CPUPrice: 1},
		Actuator: schemas.ActuatorSpec{Namespace: "jobs"}}}
	r.meter(cost, 2)
	r.meter(&schemas.JobRecord{ID: "free"}, 2) // no cost: never measured
	got := r.Meter(context.Background())
	want := targets.Use{Job: "priced", CPU: 0.2515, MemoryBytes: 100<<20 + 1<<30, Replicas: 2, Source: "metrics-api"}
	if len(got) != 1 || got[0] != want {
		t.Errorf("Meter = %+v, want %+v", got, want)
	}
	if len(asked) != 1 || asked[0] != "/apis/metrics.k8s.io/v1beta1/namespaces/jobs/pods?pace.dev/job=priced" {
		t.Errorf("asked %v", asked)
	}
	r.meter(cost, 0) // scaled to nothing, or terminated
	if got := r.Meter(context.Background()); len(got) != 0 {
		t.Errorf("after scale to 0: %+v", got)
	}
}
