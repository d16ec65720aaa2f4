// Package gate is the bus gate stage: API Priority and Fairness in front of
// every infrastructure operation Pace makes. It consumes KubeRequests from
// pace.k8s.requests, classifies them, estimates their seats as
// kube-apiserver would (apf.Gate.Admit: a scale patch or a delete is a
// write, one seat plus final seats for the watches the gate's process
// tracks on its resource), fair-queues them, dispatches admitted ones to an
// Actuator and holds their seats until the outcome, and publishes an
// AdmissionEvent for each decision, with the seats, on
// pace.admission.<level>.<schema> and a KubeOutcome on pace.k8s.outcomes.
//
// An Actuator that does not answer within Config.OutcomeTimeout has its
// request's seats released and a failed outcome reported; its late answer
// is dropped. A request that cannot be read is counted
// (pace_gate_malformed_total) and kept as a dead letter, byte for byte
// (bus.Client.SetAside), and the gate goes on with the next one.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// Actuator executes an admitted infrastructure request and returns its outcome.
type Actuator interface {
	Execute(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error)
}

// ActuatorFunc adapts a function to Actuator.
type ActuatorFunc func(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error)

// Execute calls f.
func (f ActuatorFunc) Execute(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
	return f(ctx, req)
}

// Config are the stage's settings.
type Config struct {
	// OutcomeTimeout bounds how long an admitted request holds its seats
	// waiting for the actuator; 0 means 2 minutes.
	OutcomeTimeout time.Duration `json:"outcomeTimeout"`
	// Consumer is the durable consumer name; "" means "pace-gate".
	Consumer string `json:"consumer,omitempty"`
	// MaxPending bounds the requests in the stage (queued or executing); 0 means 1000.
	MaxPending int `json:"maxPending,omitempty"`
}

// Defaults fills zero fields.
func (c Config) Defaults() Config {
	if c.OutcomeTimeout == 0 {
		c.OutcomeTimeout = 2 * time.Minute
	}
	if c.Consumer == "" {
		c.Consumer = "pace-gate"
	}
	if c.MaxPending == 0 {
		c.MaxPending = 1000
	}
	return c
}

// Validate checks the (defaulted) settings.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.OutcomeTimeout < 0 {
		errs = append(errs, field.Invalid(field.NewPath("outcomeTimeout"), c.OutcomeTimeout.String(), "must not be negative"))
	}
	if c.MaxPending < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxPending"), c.MaxPending, "must not be negative"))
	}
	return errs
}

// Stage is the bus gate stage.
type Stage struct {
	c         bus.Consuming
	gate      *apf.Gate
	act       Actuator
	cfg       Config
	log       *slog.Logger
	clk       clock.PassiveClock
	malformed prometheus.Counter
}

// Option configures a Stage.
type Option func(*Stage)

// WithClock sets the clock that stamps admission events and outcomes
// (default: the real one).
func WithClock(clk clock.PassiveClock) Option { return func(s *Stage) { s.clk = clk } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Stage) { s.log = l } }

// Deps is what the stage works on: the bus it consumes requests from, the
// APF gate that admits them and what executes them.
type Deps struct {
	Bus      bus.Consuming
	Gate     *apf.Gate
	Actuator Actuator
}

// New returns the stage admitting the bus's infrastructure requests through
// the gate to the actuator; cfg is defaulted and validated.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	c, gate, act := deps.Bus, deps.Gate, deps.Actuator
	if c == nil || gate == nil || act == nil {
		return nil, errors.New("gate: Deps.Bus, Deps.Gate and Deps.Actuator are required")
	}
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	s := &Stage{c: c, gate: gate, act: act, cfg: cfg, log: slog.New(slog.DiscardHandler), clk: clock.RealClock{},
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_gate_malformed_total",
			Help: "Infrastructure requests the gate could not read, dead-lettered on pace.metrics.<job>.dead."}),
	}
	for _, opt := range opts {
		opt(s)
	}
	s.log = s.log.With("stage", "gate")
	return s, nil
}

// Metrics returns the stage's Prometheus metrics: pace_gate_malformed_total.
func (s *Stage) Metrics() prometheus.Collector { return s.malformed }

// Run consumes requests until ctx ends, then waits for the requests in
// flight and returns nil.
func (s *Stage) Run(ctx context.Context) error {
	stream := s.c.Prefix().Stream(schemas.StreamKube)
	// Filtered on the requests' subject although the stream holds no other:
	// a message a consumer delivered into the stream keeps its own subject
	// (a tenant's push consumer can deliver anywhere), and must not be
	// taken for a request.
	cons, err := s.c.JetStream().CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: s.cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: s.c.Prefix().KubeRequests(),
		AckWait:       flowcontrol.MaxWaitLimit + s.cfg.OutcomeTimeout + 30*time.Second,
		MaxAckPending: s.cfg.MaxPending, Description: "the APF gate of infrastructure requests",
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("gate consumer: %w", err)
	}
	// Each request waits in its APF queue on a goroutine of its own;
	// settled when it leaves: acked once its outcome is published, nacked
	// when it could not be admitted (or the stage stops), to come back.
	loop := pubsub.Loop{Handler: func(m *message.Message) ([]*message.Message, error) { return nil, s.handle(m) },
		Middlewares: []message.HandlerMiddleware{pubsub.SetAside(s.c, "gate"), pubsub.CountMalformed(s.malformed),
			pubsub.Recover(s.log)}, Concurrent: true}
	if err := loop.Run(ctx, cons); err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	return nil
}

// handle admits one request through the gate, runs it and publishes its
// admission event and outcome; an error returns the request to the stream.
// An unreadable request is an error wrapping bus.ErrMalformed, kept byte
// for byte as a dead letter: on the work-queue stream PACE_K8S, settling
// the request deletes it.
func (s *Stage) handle(m *message.Message) error {
	ctx := m.Context()
	req, err := pubsub.Decode[schemas.KubeRequest](m)
	if err != nil {
		return err
	}
	log := s.log.With("request_id", req.ID, "job", req.Job)
	span := trace.SpanFromContext(ctx)
	if tracing.Enabled() {
		ctx, span = kubeSpan(ctx, req)
		defer span.End()
	}
	attrs := policy.Attributes{User: req.User, Groups: req.Groups, IsResourceRequest: req.Resource != "", Verb: req.Verb,
		APIGroup: req.APIGroup, Resource: req.Resource, Subresource: req.Subresource, Namespace: req.Namespace, Name: req.Name, Path: req.Path}
	// Estimated as kube-apiserver would (a scale patch or a delete is a write:
	// one seat, plus final seats for the watches it notifies that Pace knows of).
	adm, err := s.gate.Admit(ctx, attrs, nil, "")
	var rej *flowcontrol.RejectedError
	switch {
	case errors.As(err, &rej):
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: another instance will take it
		}
		log.Warn("kube request rejected", "priority_level", rej.PriorityLevel, "flow_schema", rej.FlowSchema, "reason", rej.Reason)
		span.SetStatus(codes.Error, "rejected: "+string(rej.Reason))
		s.publish(ctx, log, s.c.Prefix().Admission(token(rej.PriorityLevel), token(rej.FlowSchema)), &schemas.AdmissionEvent{
			RequestID: req.ID, PriorityLevel: rej.PriorityLevel, FlowSchema: rej.FlowSchema, Outcome: schemas.Refused,
			Reason: string(rej.Reason), Seats: rej.Seats, At: s.clk.Now()})
		s.publish(ctx, log, s.c.Prefix().KubeOutcomes(), &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Rejected,
			Reason: fmt.Sprintf("%s (retry after %v)", rej.Reason, rej.RetryAfter), At: s.clk.Now()})
		return nil
	case err != nil:
		log.Error("kube request not admitted", "err", err)
		return err
	}
	c := adm.Classification
	s.publish(ctx, log, s.c.Prefix().Admission(token(c.PriorityLevel.Name), token(c.FlowSchema.Name)), &schemas.AdmissionEvent{
		RequestID: req.ID, PriorityLevel: c.PriorityLevel.Name, FlowSchema: c.FlowSchema.Name, Flow: c.Distinguisher,
		Outcome: schemas.Dispatched, Seats: adm.Estimate().MaxSeats(), Wait: schemas.Duration(adm.Wait), At: s.clk.Now()})
	var out *schemas.KubeOutcome
	adm.Finish(func() { out = s.execute(ctx, log, req) })
	span.SetAttributes(attribute.String("pace.kube.outcome", string(out.Status)))
	if out.Status != schemas.Applied {
		span.SetStatus(codes.Error, out.Reason)
	}
	s.publish(ctx, log, s.c.Prefix().KubeOutcomes(), out)
	return nil
}

// execute runs the actuator, holding the seats until its outcome or
// OutcomeTimeout, whichever comes first.
func (s *Stage) execute(ctx context.Context, log *slog.Logger, req *schemas.KubeRequest) *schemas.KubeOutcome {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OutcomeTimeout)
	defer cancel()
	type result struct {
		out *schemas.KubeOutcome
		err error
	}
	done := make(chan result, 1) // the actuator's late answer lands here and is dropped
	go func() {
		out, err := s.act.Execute(ctx, req)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Failure, Reason: r.err.Error(), At: s.clk.Now()}
		}
		if r.out == nil {
			return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, At: s.clk.Now()}
		}
		return r.out
	case <-ctx.Done():
		log.Warn("no outcome in time, seats released", "timeout", s.cfg.OutcomeTimeout)
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Failure,
			Reason: fmt.Sprintf("no outcome within %v; seats released", s.cfg.OutcomeTimeout), At: s.clk.Now()}
	}
}

// publish sends m, even while the stage stops (within 5 s).
func (s *Stage) publish(ctx context.Context, log *slog.Logger, subject string, m schemas.Message) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.c.Publish(ctx, subject, m, ""); err != nil {
		log.Error("publish failed", "subject", subject, "err", err)
	}
}

// token makes a FlowSchema or level name (a DNS subdomain) a single subject token.
func token(name string) string { return strings.ReplaceAll(name, ".", "_") }

// kubeSpan starts the span of an infrastructure request, from its
// admission (whose span is a child) to its outcome: a child of the span
// that asked for it, a decision of its job's trace.
func kubeSpan(ctx context.Context, req *schemas.KubeRequest) (context.Context, trace.Span) {
	target := req.Resource
	if req.Subresource != "" {
		target += "/" + req.Subresource
	}
	return tracing.Tracer().Start(ctx, "kube "+req.Verb+" "+target, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("pace.job", req.Job), attribute.String("pace.kube.request_id", req.ID),
			attribute.String("pace.kube.verb", req.Verb), attribute.String("pace.kube.resource", req.Resource),
			attribute.String("pace.kube.subresource", req.Subresource), attribute.String("pace.kube.namespace", req.Namespace),
			attribute.String("pace.kube.name", req.Name), attribute.Int("pace.kube.replicas", req.Replicas)))
}
