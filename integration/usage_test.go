package integration

import (
	"context"
	"log/slog"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestMetricsAPIAbsentMeasuresNothing: against a real kube-apiserver that
// serves no metrics API (no metrics-server), the meter of a job with a cost
// measures nothing, so that its cost is not taken for zero use, and goes on.
func TestMetricsAPIAbsentMeasuresNothing(t *testing.T) {
	ctx := context.Background()
	const ns = "pss-metrics"
	grantActuator(t, kubernetes.NewForConfigOrDie(cp.Admin), ns, "unused")
	rt := newKubeRuntime(t, kubernetes.NewForConfigOrDie(cp.Admin), kubeactuator.Config{NATSURL: "nats://pace-nats:4222"},
		slog.New(slog.DiscardHandler))
	rec := &schemas.JobRecord{ID: "priced", Spec: schemas.JobSpec{Cost: &schemas.CostSpec{CPUPrice: 1},
		Worker:   schemas.WorkerSpec{Image: "registry.example/app:1"},
		Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns}}}
	if _, err := rt.Scale(ctx, rec, 1); err != nil {
		t.Fatal(err)
	}
	if got := rt.Meter(ctx); len(got) != 0 {
		t.Errorf("Meter without a metrics API = %+v, want nothing", got)
	}
}
