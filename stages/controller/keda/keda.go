// Package keda serves Pace's scaling decisions to KEDA (keda.sh) as an
// external scaler: a KEDA ScaledObject whose trigger is of type
// "external", with scalerMetadata job: <job id>, scales its workload to
// the replicas Pace's controller wants for that job.
//
// The metric of a job is its desired replicas (the latest decision on
// pace.decisions.<job>, the spec's initial replicas before the first one,
// 0 once the job is finished) with a target of 1 per replica, so that the
// HPA KEDA drives asks for exactly that many; the job is active while the
// count is above 0, which lets KEDA scale the workload to zero.
package keda

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/keda/externalscaler"
)

// MetadataJob is the trigger metadata key that names the Pace job.
const MetadataJob = "job"

// Bus is what the scaler reads: job records and decisions.
type Bus interface {
	Jobs() bus.Jobs
	Outputs() bus.Outputs // the last decision
}

// Scaler implements KEDA's ExternalScaler service.
type Scaler struct {
	externalscaler.UnimplementedExternalScalerServer
	bus  Bus
	poll time.Duration
	log  *slog.Logger
}

// New returns a scaler reading b; its streams look for changes every poll
// (0: every second).
func New(b Bus, poll time.Duration, opts ...Option) *Scaler {
	if poll <= 0 {
		poll = time.Second
	}
	s := &Scaler{bus: b, poll: poll, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Option configures a Scaler.
type Option func(*Scaler)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Scaler) { s.log = l } }

// MetricName is the name of job's metric.
func MetricName(job string) string { return "pace-" + job }

// desired returns the job the reference names and its desired replicas.
func (s *Scaler) desired(ctx context.Context, ref *externalscaler.ScaledObjectRef) (string, int, error) {
	job := ref.GetScalerMetadata()[MetadataJob]
	if !schemas.ValidToken(job) {
		return "", 0, status.Errorf(codes.InvalidArgument,
			"scalerMetadata.%s %q: must name a Pace job (1-128 letters, digits, '-' or '_')", MetadataJob, job)
	}
	rec, err := s.bus.Jobs().Status(ctx, job)
	if errors.Is(err, bus.ErrJobNotFound) {
		return job, 0, status.Errorf(codes.NotFound, "scalerMetadata.%s: no job %q", MetadataJob, job)
	}
	if err != nil {
		return job, 0, status.Errorf(codes.Unavailable, "job %s: %v", job, err)
	}
	if rec.State.Final() {
		return job, 0, nil
	}
	d, err := s.bus.Outputs().LastDecision(ctx, job)
	if err != nil {
		return job, 0, status.Errorf(codes.Unavailable, "decisions of %s: %v", job, err)
	}
	if d == nil {
		return job, rec.Spec.Replicas.Initial, nil
	}
	return job, d.Replicas, nil
}

// IsActive reports whether the job wants any replica.
func (s *Scaler) IsActive(ctx context.Context, ref *externalscaler.ScaledObjectRef) (*externalscaler.IsActiveResponse, error) {
	_, n, err := s.desired(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &externalscaler.IsActiveResponse{Result: n > 0}, nil
}

// StreamIsActive sends whether the job wants any replica, then each change
// of it, until the caller goes away.
func (s *Scaler) StreamIsActive(ref *externalscaler.ScaledObjectRef, stream externalscaler.ExternalScaler_StreamIsActiveServer) error {
	ctx := stream.Context()
	job, n, err := s.desired(ctx, ref)
	if err != nil {
		return err
	}
	active := n > 0
	if err := stream.Send(&externalscaler.IsActiveResponse{Result: active}); err != nil {
		return err
	}
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_, n, err := s.desired(ctx, ref)
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				return err // the job was deleted
			}
			s.log.Warn("KEDA activity stream: job unreadable, keeping its last state", "job", job, "err", err)
			continue
		}
		if now := n > 0; now != active {
			active = now
			if err := stream.Send(&externalscaler.IsActiveResponse{Result: active}); err != nil {
				return err
			}
		}
	}
}

// metricSpec is the job's one metric: replicas, one per replica.
func metricSpec(job string) *externalscaler.GetMetricSpecResponse {
	return &externalscaler.GetMetricSpecResponse{MetricSpecs: []*externalscaler.MetricSpec{
		{MetricName: MetricName(job), TargetSize: 1, TargetSizeFloat: 1}}}
}

// GetMetricSpec names the job's metric and its target of 1 per replica.
func (s *Scaler) GetMetricSpec(ctx context.Context, ref *externalscaler.ScaledObjectRef) (*externalscaler.GetMetricSpecResponse, error) {
	job, _, err := s.desired(ctx, ref)
	if err != nil {
		return nil, err
	}
	return metricSpec(job), nil
}

// StreamMetricSpec sends the job's metric spec, which never changes, and
// holds the stream until the caller goes away.
func (s *Scaler) StreamMetricSpec(ref *externalscaler.ScaledObjectRef, stream externalscaler.ExternalScaler_StreamMetricSpecServer) error {
	job, _, err := s.desired(stream.Context(), ref)
	if err != nil {
		return err
	}
	if err := stream.Send(metricSpec(job)); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// GetMetrics returns the job's desired replicas.
func (s *Scaler) GetMetrics(ctx context.Context, req *externalscaler.GetMetricsRequest) (*externalscaler.GetMetricsResponse, error) {
	job, n, err := s.desired(ctx, req.GetScaledObjectRef())
	if err != nil {
		return nil, err
	}
	name := req.GetMetricName()
	if name == "" {
		name = MetricName(job)
	}
	return &externalscaler.GetMetricsResponse{MetricValues: []*externalscaler.MetricValue{
		{MetricName: name, MetricValue: int64(n), MetricValueFloat: float64(n)}}}, nil
}

// Serve serves s on ln until ctx ends, with TLS when tlsConfig is not nil
// (KEDA's trigger takes caCert, tlsClientCert and tlsClientKey). Streams
// still open when ctx ends are cut after a short grace.
func Serve(ctx context.Context, ln net.Listener, s *Scaler, tlsConfig *tls.Config) error {
	var opts []grpc.ServerOption
	if tlsConfig != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	srv := grpc.NewServer(opts...)
	externalscaler.RegisterExternalScalerServer(srv, s)
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		cut := time.AfterFunc(2*time.Second, srv.Stop) // streams end only when cut
		srv.GracefulStop()
		cut.Stop()
	}()
	err := srv.Serve(ln)
	cancel()
	<-stopped
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}
