// Package runner runs a stage's work: loops that ride out a recovering bus
// (Rerun), loops run together (Group), and leader terms whose work and
// metrics are built anew for each term (Term).
package runner

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Loop is work that runs until ctx ends (returning nil) or it fails.
type Loop = func(ctx context.Context) error

// Rerun runs loop again, a second later, each time it fails with an error
// temporary says will pass (bus.Temporary: the bus recovering, a restarted
// server, a cluster electing leaders), so that a stage rides out an outage
// instead of exiting. It returns loop's other errors, and nil once ctx has
// ended.
func Rerun(ctx context.Context, log *slog.Logger, temporary func(error) bool, loop Loop) error {
	for {
		err := loop(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !temporary(err) {
			return err
		}
		log.Warn("stage loop failed for a while, running it again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// Group returns a loop that runs loops together until ctx ends or one
// fails.
func Group(loops ...Loop) Loop {
	return func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, loop := range loops {
			g.Go(func() error { return loop(gctx) })
		}
		return g.Wait()
	}
}

// Build makes the work of one leader term and the metrics of the stage
// instance it runs (nil: none).
type Build func() (Loop, prometheus.Collector, error)

// Term is the leader-only work of a stage. Each term runs a stage instance
// of its own (one at a time): the first is built by NewTerm, so that a bad
// configuration fails at start, the next ones when their term begins.
type Term struct {
	// Stage names the stage, and its leader election.
	Stage   string
	build   Build
	next    Loop // built and not run yet; only Run touches it after NewTerm
	metrics termMetrics
}

// NewTerm builds stage's first term.
func NewTerm(stage string, build Build) (*Term, error) {
	run, m, err := build()
	if err != nil {
		return nil, err
	}
	t := &Term{Stage: stage, build: build, next: run}
	t.metrics.set(m)
	return t, nil
}

// Run runs one term until ctx ends (nil) or its work fails. Terms run one
// at a time.
func (t *Term) Run(ctx context.Context) error {
	if t.next == nil {
		run, m, err := t.build()
		if err != nil {
			return err
		}
		t.next = run
		t.metrics.set(m)
	}
	run := t.next
	t.next = nil
	if err := run(ctx); ctx.Err() == nil {
		return err
	}
	return nil
}

// Metrics exposes the metrics of the current term's stage instance.
func (t *Term) Metrics() prometheus.Collector { return &t.metrics }

// termMetrics collects the current stage instance's metrics. It describes
// nothing (an unchecked collector), as its instance changes.
type termMetrics struct {
	cur atomic.Pointer[prometheus.Collector]
}

func (t *termMetrics) set(c prometheus.Collector) {
	if c != nil {
		t.cur.Store(&c)
	}
}

// Describe implements prometheus.Collector.
func (t *termMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (t *termMetrics) Collect(ch chan<- prometheus.Metric) {
	if c := t.cur.Load(); c != nil {
		(*c).Collect(ch)
	}
}
