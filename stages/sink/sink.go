// Package sink delivers progress messages (pace.metrics.<job>.progress) to
// metric stores: InfluxDB (package influx), Prometheus (package prom), and
// the bus itself, whose progress stream is the history the manager's report
// and the web UI read when no InfluxDB is configured.
//
// A Sink must never block: it buffers up to a bound and drops (counting)
// beyond it, so that a slow or absent store never stalls the pipeline.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/pubsub"
	"github.com/pace-platform/pace/schemas"
)

// Sink receives progress messages.
type Sink interface {
	// Write hands over one progress message; it must not block.
	Write(p *schemas.Progress)
	// Forget drops what the sink holds of a deleted job.
	Forget(job string)
}

// Start selects where a Stage starts reading.
type Start int

// Start positions.
const (
	// Durable resumes a durable consumer named "sink-<name>" (new messages
	// only when it is first created): nothing is skipped across restarts.
	Durable Start = iota
	// Latest reads the latest progress of every job first, then follows;
	// for sinks that hold current values only, such as Prometheus.
	Latest
)

// Config says which sink a Stage feeds and from where.
type Config struct {
	// Name identifies the sink in logs, metrics and its consumer's name
	// (sink-<name>).
	Name string
	// Start is where the sink starts reading progress.
	Start Start
}

// Stage feeds one Sink from the bus. Create it with New.
type Stage struct {
	bus       bus.Consuming
	js        jetstream.JetStream
	nc        *nats.Conn
	prefix    schemas.Prefix
	name      string
	sink      Sink
	start     Start
	log       *slog.Logger
	malformed prometheus.Counter
}

// Option configures a Stage.
type Option func(*Stage)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(st *Stage) { st.log = l } }

// Deps is what the stage works on: the bus whose progress it reads and the
// sink it feeds.
type Deps struct {
	Bus  bus.Consuming
	Sink Sink
}

// New returns a stage feeding deps.Sink from the bus's progress.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	c, s := deps.Bus, deps.Sink
	if c == nil || s == nil {
		return nil, errors.New("sink: Deps.Bus and Deps.Sink are required")
	}
	if !schemas.ValidToken(cfg.Name) {
		return nil, fmt.Errorf("sink config: name %q: must be 1-128 letters, digits, '-' or '_'", cfg.Name)
	}
	st := &Stage{bus: c, js: c.JetStream(), nc: c.Conn(), prefix: c.Prefix(), name: cfg.Name, sink: s, start: cfg.Start,
		log: slog.New(slog.DiscardHandler),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "pace_monitor_sink_malformed_total",
			Help:        "Progress messages the sink could not read, dead-lettered on pace.metrics.<job>.dead.",
			ConstLabels: prometheus.Labels{"sink": cfg.Name}}),
	}
	for _, opt := range opts {
		opt(st)
	}
	st.log = st.log.With("stage", "sink", "sink", cfg.Name)
	return st, nil
}

// Metrics returns the stage's Prometheus metrics: pace_monitor_sink_malformed_total{sink}.
func (st *Stage) Metrics() prometheus.Collector { return st.malformed }

// Run delivers progress to the sink until ctx ends; cancellation returns nil.
// Deleted jobs are forgotten (a finished job's record, and its progress,
// outlive the release of its resources).
func (st *Stage) Run(ctx context.Context) error {
	sub, err := st.nc.Subscribe(st.prefix.Jobs("*", schemas.EventDeleted), func(m *nats.Msg) {
		if tokens := strings.Split(m.Subject, "."); len(tokens) > 2 {
			st.sink.Forget(tokens[2])
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe job events: %w", err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // ending a subscription
	filter := st.prefix.Metrics("*", schemas.ProgressMetrics)
	var cons jetstream.Consumer
	switch st.start {
	case Latest:
		cons, err = st.js.OrderedConsumer(ctx, st.prefix.Stream(schemas.StreamMetrics), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		})
	default:
		cons, err = st.js.CreateOrUpdateConsumer(ctx, st.prefix.Stream(schemas.StreamMetrics), jetstream.ConsumerConfig{
			Durable: "sink-" + st.name, Description: "progress to the " + st.name + " sink",
			FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
			AckWait: 30 * time.Second, MaxAckPending: 10000,
		})
	}
	if err != nil {
		return fmt.Errorf("%s sink consumer: %w", st.name, err)
	}
	st.log.Info("sink started")
	loop := pubsub.Loop{Handler: st.handle,
		// Every sink sets a message aside under one name, so that several
		// sinks reading it store one dead letter.
		Middlewares: []message.HandlerMiddleware{pubsub.SetAside(st.bus, "sink"), pubsub.CountMalformed(st.malformed),
			pubsub.Recover(st.log)}}
	if st.start == Latest {
		loop.Settle = func(jetstream.Msg, error) {} // an ordered consumer: nothing to ack
	}
	if err := loop.Run(ctx, cons); err != nil {
		return fmt.Errorf("%s sink: %w", st.name, err)
	}
	return nil
}

// handle writes one progress message to the sink.
func (st *Stage) handle(m *message.Message) ([]*message.Message, error) {
	p, err := pubsub.Decode[schemas.Progress](m)
	if err != nil {
		return nil, err
	}
	st.sink.Write(p)
	return nil, nil
}
