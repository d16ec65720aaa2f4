package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/stages/controller/keda"
	"github.com/pace-platform/pace/stages/controller/keda/externalscaler"
)

// TestUpServesKEDA asks pace up's KEDA external scaler, as KEDA would, for
// a queue-only streaming job's replicas: the metric follows the controller's
// latest decision for the job.
func TestUpServesKEDA(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	u := startUp(t, t.TempDir(), "--keda-listen", addr)
	job := submit(t, u.httpURL, map[string]any{"name": "keda", "mode": "streaming",
		"replicas": map[string]any{"min": 0, "max": 6, "initial": 2}})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	scaler := externalscaler.NewExternalScalerClient(conn)
	ref := &externalscaler.ScaledObjectRef{Name: "workers", Namespace: "default", ScalerMetadata: map[string]string{keda.MetadataJob: job}}
	ctx := context.Background()
	c := u.client(t)
	var got, want float64
	bustest.Eventually(t, time.Minute, "the scaler to serve the job's latest decision", func() bool {
		d, err := c.Outputs().LastDecision(ctx, job)
		if err != nil || d == nil {
			return false
		}
		m, err := scaler.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref, MetricName: keda.MetricName(job)})
		if err != nil {
			t.Fatal(err)
		}
		got, want = m.GetMetricValues()[0].GetMetricValueFloat(), float64(d.Replicas)
		return got == want
	})
	a, err := scaler.IsActive(ctx, ref)
	if err != nil || a.GetResult() != (want > 0) {
		t.Errorf("IsActive = %v (%v) with %v replicas wanted", a, err, want)
	}
	u.stop(t)
}
