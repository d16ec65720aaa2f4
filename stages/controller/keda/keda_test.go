package keda_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/keda"
	"github.com/pace-platform/pace/stages/controller/keda/externalscaler"
)

// TestExternalScalerServesDecisions plays KEDA with a gRPC client generated
// from its externalscaler.proto, against the scaler on a real bus: the
// metric of a job is its desired replicas (the initial ones, then each
// decision's, 0 when it ends) with a target of 1, and its activity follows.
func TestExternalScalerServesDecisions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := bustest.Client(t, bustest.Server(t))
	setRecord(t, c, "ingest", schemas.Ongoing, 2)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- keda.Serve(sctx, ln, keda.New(c, 20*time.Millisecond, keda.WithLogger(slog.Default())), nil)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kedaClient := externalscaler.NewExternalScalerClient(conn)
	ref := &externalscaler.ScaledObjectRef{Name: "ingest-workers", Namespace: "apps",
		ScalerMetadata: map[string]string{keda.MetadataJob: "ingest"}}

	spec, err := kedaClient.GetMetricSpec(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ms := spec.GetMetricSpecs(); len(ms) != 1 || ms[0].GetMetricName() != "pace-ingest" || ms[0].GetTargetSizeFloat() != 1 || ms[0].GetTargetSize() != 1 {
		t.Fatalf("metric spec %v, want pace-ingest with a target of 1", ms)
	}
	metric := func() float64 {
		t.Helper()
		m, err := kedaClient.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref, MetricName: "s0-pace-ingest"})
		if err != nil {
			t.Fatal(err)
		}
		v := m.GetMetricValues()
		if len(v) != 1 || v[0].GetMetricName() != "s0-pace-ingest" || float64(v[0].GetMetricValue()) != v[0].GetMetricValueFloat() {
			t.Fatalf("metric values %v, want one, named as asked", v)
		}
		return v[0].GetMetricValueFloat()
	}
	if got := metric(); got != 2 {
		t.Errorf("before any decision: %v replicas, want the initial 2", got)
	}

	activity, err := kedaClient.StreamIsActive(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wantActive := func(want bool) {
		t.Helper()
		r, err := activity.Recv()
		if err != nil || r.GetResult() != want {
			t.Fatalf("activity stream: %v (%v), want %v", r, err, want)
		}
	}
	wantActive(true)

	decide(t, c, "ingest", 5)
	if got := metric(); got != 5 {
		t.Errorf("after a decision of 5: %v replicas", got)
	}
	decide(t, c, "ingest", 0)
	wantActive(false)
	if a, err := kedaClient.IsActive(ctx, ref); err != nil || a.GetResult() {
		t.Errorf("IsActive after a decision of 0 = %v (%v), want false", a, err)
	}
	decide(t, c, "ingest", 3)
	wantActive(true)
	setRecord(t, c, "ingest", schemas.Completed, 2)
	wantActive(false)
	if got := metric(); got != 0 {
		t.Errorf("completed job: %v replicas, want 0", got)
	}

	for _, tt := range []struct {
		meta map[string]string
		code codes.Code
	}{
		{map[string]string{}, codes.InvalidArgument},
		{map[string]string{keda.MetadataJob: "no such job"}, codes.InvalidArgument},
		{map[string]string{keda.MetadataJob: "missing"}, codes.NotFound},
	} {
		_, err := kedaClient.IsActive(ctx, &externalscaler.ScaledObjectRef{Name: "x", ScalerMetadata: tt.meta})
		if status.Code(err) != tt.code {
			t.Errorf("IsActive with metadata %v: %v, want %v", tt.meta, err, tt.code)
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v after its context ended, want nil", err)
	}
}

// setRecord stores job's record in state with initial replicas.
func setRecord(t *testing.T, c *bus.Client, job string, state schemas.JobState, initial int) {
	t.Helper()
	spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: "alice", Replicas: schemas.Replicas{Min: 0, Max: 10, Initial: initial}}.WithDefaults()
	_, err := c.Jobs().Update(context.Background(), job, func(*schemas.JobRecord) (*schemas.JobRecord, error) {
		return &schemas.JobRecord{ID: job, Spec: spec, State: state, CreatedAt: time.Now()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// decide publishes a decision of n replicas for job, as the controller does.
func decide(t *testing.T, c *bus.Client, job string, n int) {
	t.Helper()
	ctx := context.Background()
	msg, err := bus.NewMsg(ctx, c.Prefix().Decisions(job), &schemas.Decision{Job: job, At: time.Now(), Replicas: n, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JetStream().PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
}
