package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
	"github.com/pace-platform/pace/stages/controller/plugin/builtin"
)

// Defaults of Config.
const (
	DefaultDurable   = "controller"
	DefaultBucket    = string(schemas.BucketController)
	DefaultHeartbeat = 30 * time.Second
)

// Config are the controller stage's settings.
type Config struct {
	// Durable names the consumer of progress messages; "" means "controller".
	Durable string `json:"durable,omitempty"`
	// Bucket is the KV bucket (before the prefix) holding each job's
	// controller state; "" means "controller".
	Bucket string `json:"bucket,omitempty"`
	// Heartbeat is how often a decision that keeps a job's replicas is
	// published: a decision that changes them is published at once, one
	// that keeps them only once Heartbeat has passed (in progress time)
	// since the job's last published decision, marked unchanged. 0 means
	// 30s; negative publishes every decision.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
}

// Defaults returns c with zero fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	return c
}

// Validate checks a defaulted config.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, v string }{{"durable", c.Durable}, {"bucket", c.Bucket}} {
		if !schemas.ValidToken(f.v) {
			errs = append(errs, field.Invalid(field.NewPath(f.name), f.v, "must be 1-128 letters, digits, '-' or '_'"))
		}
	}
	return errs
}

// Saved is a job's controller state as kept in the KV bucket, under the job's id.
type Saved struct {
	Controller string          `json:"controller"`
	State      json.RawMessage `json:"state"`
	// LastDecision is the progress time of the last decision (check_interval).
	LastDecision time.Time `json:"last_decision,omitzero"`
	// LastPublished is the time of the last published decision (zero: none
	// yet), and PublishedReplicas its replicas (the heartbeat).
	LastPublished     time.Time `json:"last_published,omitzero"`
	PublishedReplicas int       `json:"published_replicas,omitempty"`
}

// jobController is one job's live controller.
type jobController struct {
	name     string
	ctrl     plugin.Controller
	interval time.Duration
	last     time.Time
	// pubAt and pubReplicas are the time and replicas of the job's last
	// published decision; pubAt is zero before the first.
	pubAt       time.Time
	pubReplicas int
}

// Stage consumes pace.metrics.<job>.progress, runs each job's controller
// plugin and publishes its decisions on pace.decisions.<job>: every decision
// that changes the job's replicas, and otherwise one per Config.Heartbeat,
// marked unchanged. Each job's controller state is saved in a KV bucket with
// every published decision, so a restarted stage resumes where it stopped. Progress it cannot read is
// counted (pace_controller_malformed_total) and kept as a dead letter.
// Create it with New.
type Stage struct {
	c         Bus
	js        jetstream.JetStream
	cfg       Config
	reg       plugin.Registry
	log       *slog.Logger
	kv        jetstream.KeyValue
	malformed prometheus.Counter

	jobs map[string]*jobController // only the Run goroutine touches it
}

// Bus is what the controller stage needs of the bus; *bus.Client
// implements it.
type Bus interface {
	bus.Consuming
	// Jobs reads a job's record, for its spec.
	Jobs() bus.Jobs
	// Replicas is how many copies the bus keeps of a stream, for the
	// controller's bucket.
	Replicas(ctx context.Context) (int, error)
}

// Option configures a Stage.
type Option func(*Stage)

// WithRegistry sets the controller plugins jobs may name (default:
// builtin.Registry()).
func WithRegistry(reg plugin.Registry) Option { return func(s *Stage) { s.reg = reg } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Stage) { s.log = l } }

// Deps is what the stage works on.
type Deps struct {
	Bus Bus
}

// New returns a controller stage on deps.Bus. It keeps no clock: a
// decision's time is its progress's.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	c := deps.Bus
	if c == nil {
		return nil, errors.New("controller: Deps.Bus is nil")
	}
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("controller config: %w", errs.ToAggregate())
	}
	s := &Stage{c: c, js: c.JetStream(), cfg: cfg, reg: builtin.Registry(), log: slog.New(slog.DiscardHandler),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_controller_malformed_total",
			Help: "Progress messages the controller could not read, dead-lettered on pace.metrics.<job>.dead."}),
		jobs: map[string]*jobController{}}
	for _, opt := range opts {
		opt(s)
	}
	s.log = s.log.With("stage", "controller")
	return s, nil
}

// Metrics returns the stage's Prometheus metrics: pace_controller_malformed_total.
func (s *Stage) Metrics() prometheus.Collector { return s.malformed }

// bucket opens (creating if needed) the state bucket.
func (s *Stage) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if s.kv != nil {
		return s.kv, nil
	}
	// Created when missing, replicated as the rest of the bus; an existing
	// bucket is left as it is.
	name := s.c.Prefix().Bucket(schemas.Bucket(s.cfg.Bucket))
	kv, err := s.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		var replicas int
		if replicas, err = s.c.Replicas(ctx); err == nil {
			kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name,
				Description: "controller state per job", Storage: jetstream.FileStorage, Replicas: replicas})
		}
		if errors.Is(err, jetstream.ErrBucketExists) { // another replica's
			kv, err = s.js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("controller state bucket: %w", err)
	}
	s.kv = kv
	return kv, nil
}

// controller returns job's controller, building it from the job's spec and
// restoring its saved state; nil when the job names a controller that is not
// built in (an external controller publishes its own decisions).
func (s *Stage) controller(ctx context.Context, job string) (*jobController, error) {
	if jc, ok := s.jobs[job]; ok {
		return jc, nil
	}
	rec, _, err := s.c.Jobs().Get(ctx, job)
	if err != nil {
		return nil, err
	}
	name := rec.Spec.Controller.Name
	if name == "" {
		name = builtin.DefaultName
	}
	if _, ok := s.reg[name]; !ok {
		s.log.Debug("external controller, no plugin runs", "job", job, "controller", name)
		s.jobs[job] = nil
		return nil, nil
	}
	ctrl, err := s.reg.New(name, Job(job, rec), rec.Spec.Controller.Params)
	if err != nil {
		return nil, err
	}
	jc := &jobController{name: name, ctrl: ctrl, interval: rec.Spec.Controller.CheckInterval.D()}
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, job)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("read controller state of %s: %w", job, err)
	default:
		var saved Saved
		if err := json.Unmarshal(e.Value(), &saved); err != nil {
			return nil, fmt.Errorf("decode controller state of %s: %w", job, err)
		}
		if saved.Controller == name {
			if err := ctrl.Restore(saved.State); err != nil {
				return nil, err
			}
			jc.last = saved.LastDecision
			jc.pubAt, jc.pubReplicas = saved.LastPublished, saved.PublishedReplicas
			s.log.Info("controller state restored", "job", job, "controller", name)
		}
	}
	s.jobs[job] = jc
	return jc, nil
}

// decide runs job's controller on p and returns the decision to publish,
// nil when there is none or it is not due (see publishable); the state is
// not saved yet.
func (s *Stage) decide(ctx context.Context, p *schemas.Progress) (*schemas.Decision, *jobController, error) {
	jc, err := s.controller(ctx, p.Job)
	if err != nil || jc == nil {
		return nil, nil, err
	}
	if p.State.Final() && p.State != "" {
		delete(s.jobs, p.Job)
		return nil, nil, nil
	}
	if jc.interval > 0 && !jc.last.IsZero() && p.At.Sub(jc.last) < jc.interval {
		return nil, nil, nil
	}
	d, err := jc.ctrl.Decide(*p)
	if errors.Is(err, plugin.ErrStale) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	jc.last = p.At
	if !s.publishable(jc, &d) {
		return nil, nil, nil
	}
	return &d, jc, nil
}

// publishable tells whether d is published, and if so notes it as jc's last
// published decision: when its replicas differ from the last published ones
// (or none was), or, marked unchanged, once the heartbeat has passed since.
// Time is the progress time, d.At, so a replay decides the same.
//
// The state is saved only with a published decision, not after every
// decision: an idle job then costs one KV write per heartbeat instead of one
// per sample. What decides the job's replicas is always saved, since every
// change of them is published; what a restart can lose is at most one
// heartbeat of estimator memory (rate sums, stabilization windows) and of
// check_interval's clock, which the next samples rebuild.
func (s *Stage) publishable(jc *jobController, d *schemas.Decision) bool {
	if !jc.pubAt.IsZero() && d.Replicas == jc.pubReplicas && s.cfg.Heartbeat > 0 {
		if d.At.Sub(jc.pubAt) < s.cfg.Heartbeat {
			return false
		}
		d.Unchanged = true
	}
	jc.pubAt, jc.pubReplicas = d.At, d.Replicas
	return true
}

// save stores jc's state under job in the KV bucket.
func (s *Stage) save(ctx context.Context, job string, jc *jobController) error {
	state, err := jc.ctrl.State()
	if err != nil {
		return err
	}
	b, err := json.Marshal(Saved{Controller: jc.name, State: state, LastDecision: jc.last,
		LastPublished: jc.pubAt, PublishedReplicas: jc.pubReplicas})
	if err != nil {
		return err
	}
	kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, job, b); err != nil {
		return fmt.Errorf("save controller state of %s: %w", job, err)
	}
	return nil
}

// Run consumes progress messages until ctx ends; cancellation returns nil.
// It runs on Watermill's Router: one handler, reading the progress of every
// job one message at a time from a durable consumer that starts with new
// messages.
func (s *Stage) Run(ctx context.Context) error {
	prefix := s.c.Prefix()
	sub := pubsub.NewSubscriber(s.js, pubsub.Config{Durable: func(string) string { return s.cfg.Durable },
		Stream:  func(string) string { return prefix.Stream(schemas.StreamMetrics) },
		Deliver: jetstream.DeliverNewPolicy, NakDelay: time.Second, Description: "controller: progress to decisions"}, s.log)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: handleTimeout}, pubsub.Logger(s.log))
	if err != nil {
		return fmt.Errorf("controller router: %w", err)
	}
	router.AddConsumerHandler("progress", prefix.Metrics("*", schemas.ProgressMetrics), sub, s.handle).
		AddMiddleware(pubsub.SetAside(s.c, "controller"), pubsub.CountMalformed(s.malformed), pubsub.Recover(s.log)) // a dead letter on pace.metrics.<job>.dead
	s.log.Info("controller started", "plugins", s.reg.Names())
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("consume progress: %w", err)
	}
	if ctx.Err() == nil {
		return errors.New("consume progress: the subscription ended")
	}
	return nil
}

// handleTimeout bounds the handling of one progress message.
const handleTimeout = 10 * time.Second

// handle decides on one progress message, publishes the decision, then
// saves the controller's state. A message that cannot be read is returned
// as malformed, to be counted and set aside as a dead letter.
// When deciding, publishing or saving fails, the job's controller is dropped
// from memory (it is rebuilt from the last saved state) and the message is
// retried; the decision's message id makes a republished decision a duplicate.
func (s *Stage) handle(msg *message.Message) error {
	p, err := pubsub.Decode[schemas.Progress](msg)
	if err != nil {
		return err
	}
	log := s.log.With("job", p.Job)
	// A stop does not interrupt a message being handled: its decision is
	// published and its state saved, each within a bounded time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(msg.Context()), handleTimeout)
	defer cancel()
	d, jc, err := s.decide(ctx, p)
	if errors.Is(err, bus.ErrJobNotFound) || errors.Is(err, plugin.ErrInvalidConfig) {
		log.Warn("progress of a job without a usable controller dropped", "err", err)
		return nil
	}
	if err == nil && d != nil {
		dctx := ctx
		if tracing.Enabled() {
			var span trace.Span
			dctx, span = decisionSpan(dctx, d)
			defer span.End()
		}
		err = s.c.Publish(dctx, s.c.Prefix().Decisions(d.Job), d, d.Job+"/"+strconv.FormatInt(d.At.UnixNano(), 10))
	}
	if err != nil {
		delete(s.jobs, p.Job)
		log.Warn("decision failed, will retry", "err", err)
		return err
	}
	if d != nil {
		if err := s.save(ctx, p.Job, jc); err != nil {
			delete(s.jobs, p.Job)
			log.Warn("controller state not saved, will retry", "err", err)
			return err
		}
		log.Debug("decided", "replicas", d.Replicas, "current", d.Current, "unchanged", d.Unchanged, "reason", d.Reason)
	}
	return nil
}

// decisionSpan starts the span of a published decision, a child of the
// progress it was made from (so of its job's trace), with its inputs.
func decisionSpan(ctx context.Context, d *schemas.Decision) (context.Context, trace.Span) {
	attrs := make([]attribute.KeyValue, 0, 6+len(d.Inputs))
	attrs = append(attrs, attribute.String("pace.job", d.Job), attribute.String("pace.decision.controller", d.Controller),
		attribute.Int("pace.decision.replicas", d.Replicas), attribute.Int("pace.decision.current", d.Current),
		attribute.Bool("pace.decision.unchanged", d.Unchanged), attribute.String("pace.decision.reason", d.Reason))
	for k, v := range d.Inputs {
		attrs = append(attrs, attribute.Float64("pace.decision.input."+k, v))
	}
	return tracing.Tracer().Start(ctx, "decide "+d.Job, trace.WithAttributes(attrs...))
}
