package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/schemas"
)

// DefaultDurable is the name of the processor's durable consumer.
const DefaultDurable = "processor"

// Config are the processor stage's settings.
type Config struct {
	// Window is the smoothing window of rates; 0 means 10s.
	Window time.Duration `json:"window,omitempty"`
	// Durable names the consumer of raw samples; "" means "processor".
	// Processors sharing a name share the work (one job's samples may then
	// reach different instances, whose rates restart from the job's start).
	Durable string `json:"durable,omitempty"`
}

// Defaults returns c with zero fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	return c
}

// Validate checks a defaulted config.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.Window < 0 {
		errs = append(errs, field.Invalid(field.NewPath("window"), c.Window.String(), "must not be negative"))
	}
	if strings.ContainsAny(c.Durable, ".*> ") {
		errs = append(errs, field.Invalid(field.NewPath("durable"), c.Durable, "must not contain '.', '*', '>' or spaces"))
	}
	return errs
}

// Stage consumes raw samples and publishes progress. Create it with New.
type Stage struct {
	bus     bus.Consuming
	js      jetstream.JetStream
	prefix  schemas.Prefix
	cfg     Config
	clk     clock.PassiveClock
	log     *slog.Logger
	metrics *Metrics

	trackers map[string]*Tracker // per job; only the Run goroutine touches it
	seen     uint64              // samples processed, to evict idle trackers now and then
}

// idleTracker is how long a job may send no sample before its tracker is
// dropped (a job deleted without a final sample).
const idleTracker = time.Hour

// evict drops the trackers whose last sample is before cutoff.
func (s *Stage) evict(cutoff time.Time) {
	for job, tr := range s.trackers {
		if tr.last().Before(cutoff) {
			delete(s.trackers, job)
		}
	}
}

// Option configures a Stage.
type Option func(*Stage)

// WithClock sets the clock (default: the real one).
func WithClock(clk clock.PassiveClock) Option { return func(s *Stage) { s.clk = clk } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Stage) { s.log = l } }

// Deps is what the stage works on.
type Deps struct {
	Bus bus.Consuming
}

// New returns a processor stage on deps.Bus.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	c := deps.Bus
	if c == nil {
		return nil, errors.New("processor: Deps.Bus is nil")
	}
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("processor config: %w", errs.ToAggregate())
	}
	s := &Stage{bus: c, js: c.JetStream(), prefix: c.Prefix(), cfg: cfg, clk: clock.RealClock{},
		log: slog.New(slog.DiscardHandler), metrics: NewMetrics(), trackers: map[string]*Tracker{}}
	for _, opt := range opts {
		opt(s)
	}
	s.log = s.log.With("stage", "processor")
	return s, nil
}

// Metrics returns the stage's Prometheus metrics.
func (s *Stage) Metrics() *Metrics { return s.metrics }

// Process is the stage's handler: the progress of the sample's job, or
// none for a stale sample. A sample of a job in a final state ends the
// job's tracker.
func (s *Stage) Process(_ context.Context, in *schemas.Sample) ([]*schemas.Progress, error) {
	tr := s.trackers[in.Job]
	if tr == nil {
		tr = NewTracker(s.cfg.Window)
		s.trackers[in.Job] = tr
	}
	p, err := tr.Observe(in)
	if in.State.Final() && in.State != "" {
		delete(s.trackers, in.Job)
	}
	if s.seen++; s.seen%4096 == 0 {
		s.evict(in.At.Add(-idleTracker))
	}
	if errors.Is(err, ErrStale) {
		s.metrics.stale.Inc()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []*schemas.Progress{p}, nil
}

// pendingAck is a consumed sample waiting for its progress to be stored.
type pendingAck struct {
	msg jetstream.Msg
	pub jetstream.PubAckFuture
}

// Run consumes pace.metrics.*.raw until ctx ends; cancellation returns nil.
func (s *Stage) Run(ctx context.Context) error {
	cons, err := s.js.CreateOrUpdateConsumer(ctx, s.prefix.Stream(schemas.StreamMetrics), jetstream.ConsumerConfig{
		Durable: s.cfg.Durable, Description: "processor: raw samples to progress",
		FilterSubjects: []string{s.prefix.Metrics("*", schemas.RawMetrics), s.prefix.Metrics("*", schemas.UsageMetrics)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverNewPolicy, AckWait: 30 * time.Second, MaxAckPending: 10000,
	})
	if err != nil {
		return fmt.Errorf("processor consumer: %w", err)
	}
	acks := make(chan pendingAck, 4096)
	acked := make(chan struct{})
	go func() { // acknowledges each sample once its progress is stored, in order
		defer close(acked)
		for p := range acks {
			select {
			case <-p.pub.Ok():
				_ = p.msg.Ack()
			case err := <-p.pub.Err():
				s.metrics.errors.Inc()
				s.log.Warn("progress not stored, sample will be redelivered", "subject", p.msg.Subject(), "err", err)
				_ = p.msg.Nak()
			}
		}
	}()
	defer func() { close(acks); <-acked }()
	s.log.Info("processor started", "window", s.cfg.Window)
	loop := pubsub.Loop{
		Handler: func(m *message.Message) ([]*message.Message, error) { return nil, s.handle(m, acks) },
		Middlewares: []message.HandlerMiddleware{pubsub.SetAside(s.bus, "processor"), pubsub.CountMalformed(s.metrics.malformed),
			pubsub.Recover(s.log)},
		Settle: s.settle,
	}
	if err := loop.Run(ctx, cons); err != nil {
		return fmt.Errorf("raw samples: %w", err)
	}
	return nil
}

// Use keeps the workers' usage for their job's next progress.
func (s *Stage) Use(u *schemas.Usage) {
	tr := s.trackers[u.Job]
	if tr == nil {
		tr = NewTracker(s.cfg.Window)
		s.trackers[u.Job] = tr
	}
	tr.Use(u)
}

// errPublish is a progress the processor could not publish: its sample is
// delivered again a second later.
var errPublish = errors.New("progress not published")

// handle decodes one raw sample, processes it and publishes its progress,
// whose storing acks the sample (acks), or keeps a usage message for the
// next. A message it cannot read or process is an error wrapping
// bus.ErrMalformed, set aside.
func (s *Stage) handle(m *message.Message, acks chan<- pendingAck) error {
	jm, _ := pubsub.Msg(m)
	if strings.HasSuffix(jm.Subject(), "."+string(schemas.UsageMetrics)) {
		u, err := pubsub.Decode[schemas.Usage](m)
		if err != nil {
			return malformed(err)
		}
		s.Use(u)
		_ = jm.Ack()
		return nil
	}
	in, err := pubsub.Decode[schemas.Sample](m)
	if err != nil {
		return malformed(err)
	}
	s.metrics.age.Observe(s.clk.Since(in.At).Seconds())
	out, err := s.Process(m.Context(), in)
	if err != nil {
		return malformed(err)
	}
	if len(out) == 0 {
		_ = jm.Ack()
		return nil
	}
	for _, p := range out {
		pm, err := bus.NewMsg(m.Context(), s.prefix.Metrics(p.Job, schemas.ProgressMetrics), p)
		if err != nil {
			return malformed(err)
		}
		pm.Header.Set(schemas.HeaderMsgID, p.Job+"/"+strconv.FormatInt(p.At.UnixNano(), 10))
		f, err := s.js.PublishMsgAsync(pm)
		if err != nil {
			s.metrics.errors.Inc()
			s.log.Warn("progress not published, sample will be redelivered", "job", p.Job, "err", err)
			return fmt.Errorf("%w: %w", errPublish, err)
		}
		s.metrics.processed.Inc()
		acks <- pendingAck{msg: jm, pub: f}
	}
	return nil
}

// settle redelivers a second later a sample whose progress was not
// published; the others are settled already, or once their progress is
// stored.
func (s *Stage) settle(jm jetstream.Msg, err error) {
	if errors.Is(err, errPublish) {
		_ = jm.NakWithDelay(time.Second)
	}
}

// malformed marks a sample the processor cannot read or process
// malformed, to be counted and kept as a dead letter on
// pace.metrics.<job>.dead.
func malformed(err error) error {
	if errors.Is(err, bus.ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %w", bus.ErrMalformed, err)
}
