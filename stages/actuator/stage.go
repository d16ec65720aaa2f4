package actuator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// Identity of requests for jobs without an owner.
const serviceUser = "system:serviceaccount:pace:actuator"

// Stage publishes infrastructure requests for decisions and lifecycle events.
type Stage struct {
	c   Bus
	log *slog.Logger
	clk clock.PassiveClock

	mu        sync.Mutex
	requested map[string]request // job → what was last requested; guarded by mu
}

// request is what the stage last asked for a job.
type request struct {
	id       string // the request's id, which its outcome names
	replicas int
	retries  int // how many times in a row it was asked again after not being applied
}

// Retry delays of a request that was not applied: 1 s, doubling up to a minute.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
)

// Bus is what the actuator stage needs of the bus; *bus.Client
// implements it.
type Bus interface {
	bus.Consuming
	// Jobs reads job records (a job's spec and replicas) and sets aside a
	// job event the stage cannot read.
	Jobs() bus.Jobs
}

// Deps is what the stage works on.
type Deps struct {
	Bus Bus
}

// Config is the stage's configuration. It has no settings: the requests
// the stage makes follow the jobs' specs and decisions.
type Config struct{}

// Option configures a Stage.
type Option func(*Stage)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Stage) { s.log = l } }

// WithClock sets the clock that stamps the requests (default: the real one).
func WithClock(clk clock.PassiveClock) Option { return func(s *Stage) { s.clk = clk } }

// New returns the stage.
func New(deps Deps, _ Config, opts ...Option) (*Stage, error) {
	if deps.Bus == nil {
		return nil, errors.New("actuator: Deps.Bus is nil")
	}
	s := &Stage{c: deps.Bus, log: slog.New(slog.DiscardHandler), clk: clock.RealClock{}, requested: map[string]request{}}
	for _, opt := range opts {
		opt(s)
	}
	s.log = s.log.With("stage", "actuator")
	return s, nil
}

// Run follows request outcomes, reconciles running jobs, then consumes
// decisions and job events until ctx ends; cancellation returns nil.
func (s *Stage) Run(ctx context.Context) error {
	p := s.c.Prefix()
	outcomes, err := s.c.Conn().Subscribe(p.KubeOutcomes(), func(m *nats.Msg) { s.onOutcome(ctx, m) })
	if err != nil {
		return fmt.Errorf("actuator outcomes: %w", err)
	}
	defer outcomes.Unsubscribe() //nolint:errcheck // stopping
	if err := s.reconcile(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	router, err := s.router(p)
	if err != nil {
		return err
	}
	s.log.Info("actuator started")
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	if ctx.Err() == nil {
		return errors.New("actuator: its subscriptions ended")
	}
	return nil
}

// Durable consumers of the stage: decisions, and job events.
const (
	decisionsConsumer = "pace-actuator"
	eventsConsumer    = "pace-actuator-events"
)

// router consumes decisions and job events on Watermill's Router, one
// message at a time in each, with durable consumers that start from the
// last message of each subject (each job's last decision and last event of
// each kind), not from the whole history. A handler error asks for the
// message again a second later; a message it cannot read is dead-lettered.
func (s *Stage) router(p schemas.Prefix) (*message.Router, error) {
	durable := map[string]string{p.Decisions("*"): decisionsConsumer, p.Jobs("*", "*"): eventsConsumer}
	stream := map[string]string{p.Decisions("*"): p.Stream(schemas.StreamDecisions), p.Jobs("*", "*"): p.Stream(schemas.StreamJobs)}
	sub := pubsub.NewSubscriber(s.c.JetStream(), pubsub.Config{Durable: func(topic string) string { return durable[topic] },
		Stream:  func(topic string) string { return stream[topic] },
		Deliver: jetstream.DeliverLastPerSubjectPolicy, NakDelay: time.Second,
		Description: "actuator: decisions and lifecycle to infrastructure requests"}, s.log)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: handleTimeout}, pubsub.Logger(s.log))
	if err != nil {
		return nil, fmt.Errorf("actuator router: %w", err)
	}
	router.AddMiddleware(pubsub.Timeout(handleTimeout)) // the Router logs a handler's error
	router.AddConsumerHandler("decisions", p.Decisions("*"), sub, s.onDecision).
		AddMiddleware(pubsub.SetAside(s.c, "actuator"), pubsub.Recover(s.log)) // a dead letter on pace.metrics.<job>.dead, byte for byte
	router.AddConsumerHandler("job-events", p.Jobs("*", "*"), sub, s.onEvent).
		AddMiddleware(pubsub.SetAsideWith(s.c.Jobs().SetAsideEvent), pubsub.Recover(s.log)) // logged, dead-lettered and counted once
	return router, nil
}

// handleTimeout bounds the handling of one message.
const handleTimeout = 10 * time.Second

// reconcile asks again for the last known replicas of every ongoing job.
func (s *Stage) reconcile(ctx context.Context) error {
	jobs, err := s.c.Jobs().List(ctx)
	if err != nil {
		return fmt.Errorf("actuator reconcile: %w", err)
	}
	for _, rec := range jobs {
		if rec.State != schemas.Ongoing {
			continue
		}
		n := rec.Replicas
		if n == 0 {
			n = initialReplicas(rec.Spec)
		}
		if err := s.scale(ctx, rec, n, "reconcile after start"); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stage) onDecision(m *message.Message) error {
	d, err := pubsub.Decode[schemas.Decision](m)
	if err != nil {
		return err
	}
	ctx := m.Context()
	rec, err := s.c.Jobs().Status(ctx, d.Job)
	if errors.Is(err, bus.ErrJobNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.State != schemas.Ongoing {
		return nil // a late decision for a finished job
	}
	reason := d.Reason
	if d.Controller != "" {
		reason = d.Controller + ": " + reason
	}
	return s.scale(ctx, rec, d.Replicas, reason)
}

func (s *Stage) onEvent(m *message.Message) error {
	ev, err := pubsub.Decode[schemas.JobEvent](m)
	if err != nil {
		return err
	}
	ctx := m.Context()
	switch ev.Type {
	case schemas.EventStarted, schemas.EventCompleted, schemas.EventFailed, schemas.EventStopped,
		schemas.EventError, schemas.EventTerminated:
	default:
		return nil
	}
	rec, err := s.c.Jobs().Status(ctx, ev.Job)
	if errors.Is(err, bus.ErrJobNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	switch ev.Type {
	case schemas.EventStarted:
		if rec.State != schemas.Ongoing {
			return nil // replayed history of a job that has ended since
		}
		return s.scale(ctx, rec, initialReplicas(rec.Spec), "job started")
	case schemas.EventTerminated:
		if rec.Spec.Actuated() {
			err = s.publish(ctx, rec, &schemas.KubeRequest{Verb: "delete"}, "job terminated")
		}
	default:
		err = s.scale(ctx, rec, 0, "job "+string(ev.Type))
	}
	if err == nil {
		s.forget(ev.Job) // the job has ended: its entry would only grow the map
	}
	return err
}

// forget drops what was last requested for job, so that its next decision
// or event asks again.
func (s *Stage) forget(job string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requested, job)
}

// onOutcome asks again, after a backoff, for what was last requested for a
// job when that request was not applied (refused by the gate, failed in the
// runtime): decisions that keep a job's replicas come only once per
// heartbeat, so the stage itself drives the job to the count it asked for.
// The outcome of an older request (one superseded by a newer) is ignored.
func (s *Stage) onOutcome(ctx context.Context, m *nats.Msg) {
	out, err := bus.Decode[schemas.KubeOutcome](m.Data, m.Header)
	if err != nil || out.Status == schemas.Applied || out.Job == "" {
		return
	}
	s.mu.Lock()
	last, ok := s.requested[out.Job]
	current := ok && last.id == out.RequestID
	if current {
		delete(s.requested, out.Job)
	}
	s.mu.Unlock()
	if !current {
		return
	}
	delay := min(retryFirst<<min(last.retries, 6), retryMax)
	s.log.Info("request not applied, asking again", "job", out.Job, "status", out.Status, "reason", out.Reason,
		"replicas", last.replicas, "retry_in", delay)
	time.AfterFunc(delay, func() { s.retry(ctx, out.Job, last) })
}

// retry asks again for last, unless the job asked for something since or
// is no longer running.
func (s *Stage) retry(ctx context.Context, job string, last request) {
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	_, asked := s.requested[job]
	s.mu.Unlock()
	if asked {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, err := s.c.Jobs().Status(ctx, job)
	if err != nil || rec.State != schemas.Ongoing {
		return
	}
	if err := s.request(ctx, rec, last.replicas, "asking again: the last request was not applied", last.retries+1); err != nil {
		s.log.Warn("request not published", "job", job, "err", err)
	}
}

// scale publishes a scale request unless n is what was last requested.
// Zero is remembered like any other count: a job idling at zero replicas
// gets one request, not one per decision (each would be executed, and its
// effects sampled and decided on again). A job's entry goes when the job
// ends (onEvent) or when its last request was not applied (onOutcome).
func (s *Stage) scale(ctx context.Context, rec *schemas.JobRecord, n int, reason string) error {
	return s.request(ctx, rec, n, reason, 0)
}

// request is scale, retries being the number of times n was asked again.
func (s *Stage) request(ctx context.Context, rec *schemas.JobRecord, n int, reason string, retries int) error {
	if !rec.Spec.Actuated() {
		return nil
	}
	s.mu.Lock()
	if last, seen := s.requested[rec.ID]; seen && last.replicas == n {
		s.mu.Unlock()
		return nil
	}
	// Noted before publishing: an outcome arriving at once finds it.
	req := &schemas.KubeRequest{ID: nuid.Next(), Verb: "patch", Subresource: "scale", Replicas: n}
	s.requested[rec.ID] = request{id: req.ID, replicas: n, retries: retries}
	s.mu.Unlock()
	if err := s.publish(ctx, rec, req, reason); err != nil {
		s.forget(rec.ID)
		return err
	}
	return nil
}

// publish completes req with the job's identity and target and publishes it.
func (s *Stage) publish(ctx context.Context, rec *schemas.JobRecord, req *schemas.KubeRequest, reason string) error {
	if req.ID == "" {
		req.ID = nuid.Next()
	}
	req.Job, req.At, req.Reason = rec.ID, s.clk.Now(), reason
	req.APIGroup, req.Resource, req.Name = "batch", "jobs", "pace-"+rec.ID
	req.Namespace = rec.Spec.Actuator.Namespace
	if req.Namespace == "" {
		req.Namespace = "default"
	}
	req.User, req.Groups = rec.Spec.Owner, []string{auth.Authenticated}
	if req.User == "" || req.User == auth.Anonymous {
		req.User, req.Groups = serviceUser, []string{"system:serviceaccounts", "system:serviceaccounts:pace", auth.Authenticated}
	}
	// The request's id is its message id: a publish retried after a lost
	// acknowledgement is stored once, and the gate runs it once.
	err := bus.RetryTemporary(ctx, s.log, publishBudget, "infrastructure request", func(ctx context.Context) error {
		return s.c.Publish(ctx, s.c.Prefix().KubeRequests(), req, "kube/"+req.ID)
	})
	if err != nil {
		return fmt.Errorf("publish request for %s: %w", rec.ID, err)
	}
	s.log.Info("infrastructure request", "job", rec.ID, "verb", req.Verb, "replicas", req.Replicas, "reason", reason)
	return nil
}

// publishBudget bounds the retries of a request's publish: past it, the
// job's next decision asks again.
const publishBudget = 30 * time.Second

// initialReplicas is the worker count a job starts with.
func initialReplicas(spec schemas.JobSpec) int {
	switch {
	case spec.Replicas.Initial > 0:
		return spec.Replicas.Initial
	case spec.Replicas.Min > 0:
		return spec.Replicas.Min
	}
	return 1
}
