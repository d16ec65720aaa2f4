package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// Replicas tells how many workers a job has; *bus.Presence implements it.
type Replicas interface {
	Count(job string) int
}

// Collector samples running jobs. Create it with New and run it with Run.
type Collector struct {
	js       jetstream.JetStream
	nc       *nats.Conn
	prefix   schemas.Prefix
	cfg      Config
	clk      clock.WithTicker
	log      *slog.Logger
	replicas Replicas
	metrics  *Metrics

	wake chan struct{} // buffered 1: something became due

	mu     sync.Mutex
	work   jetstream.Stream    // the work stream, once looked up; guarded by mu
	jobs   map[string]*job     // running jobs, and final ones awaiting their last sample; guarded by mu
	due    map[string]struct{} // jobs to sample in the next round; guarded by mu
	active map[string]struct{} // jobs with queue activity since their last sample; guarded by mu
}

// job is what the collector knows of one job.
type job struct {
	rec   schemas.JobRecord
	final bool      // reached a final state: sample once more, then forget
	last  time.Time // last sample
}

// New returns a collector publishing with c. replicas may be nil, then the
// job record's replica count is used; clk nil means the real clock.
func New(c *bus.Client, cfg Config, replicas Replicas, clk clock.WithTicker, log *slog.Logger) (*Collector, error) {
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("collector config: %w", errs.ToAggregate())
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{
		js: c.JetStream(), nc: c.Conn(), prefix: c.Prefix(), cfg: cfg, clk: clk, replicas: replicas,
		log: log.With("stage", "collector"), metrics: NewMetrics(),
		wake: make(chan struct{}, 1),
		jobs: map[string]*job{}, due: map[string]struct{}{}, active: map[string]struct{}{},
	}, nil
}

// Metrics returns the collector's Prometheus metrics.
func (c *Collector) Metrics() *Metrics { return c.metrics }

// Run samples jobs until ctx ends; cancellation returns nil.
func (c *Collector) Run(ctx context.Context) error {
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket("jobs"))
	if err != nil {
		return fmt.Errorf("jobs bucket (was the bus provisioned?): %w", err)
	}
	watch, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch jobs: %w", err)
	}
	defer watch.Stop() //nolint:errcheck // ending a watch

	// Job events make a job due at once; queue activity within ActivityGap.
	subjects := map[string]func(string){c.prefix.Jobs("*", "*"): c.markDue}
	if c.cfg.ActivityGap > 0 {
		for _, s := range []string{c.prefix.Work("*"), c.prefix.Results("*", "*"), c.prefix.Dead("*")} {
			subjects[s] = c.markActive
		}
	}
	for subject, mark := range subjects {
		sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
			if tokens := strings.Split(m.Subject, "."); len(tokens) > 2 {
				mark(tokens[2])
			}
		})
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subject, err)
		}
		_ = sub.SetPendingLimits(-1, 64<<20)
		defer sub.Unsubscribe() //nolint:errcheck // ending a subscription
	}

	tick := c.clk.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	var gap <-chan time.Time
	if c.cfg.ActivityGap > 0 {
		t := c.clk.NewTicker(c.cfg.ActivityGap)
		defer t.Stop()
		gap = t.C()
	}
	c.log.Info("collector started", "interval", c.cfg.Interval, "activity_gap", c.cfg.ActivityGap)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-watch.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watch jobs: updates closed")
			}
			if e == nil { // every stored record has been seen
				c.sweep(ctx)
				continue
			}
			c.apply(ctx, e)
		case <-tick.C():
			c.markAllDue()
		case <-gap:
			c.promoteActive()
		case <-c.wake:
		}
		c.round(ctx)
	}
}

// apply follows one change of the jobs bucket.
func (c *Collector) apply(ctx context.Context, e jetstream.KeyValueEntry) {
	id := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		c.mu.Lock()
		delete(c.jobs, id)
		c.mu.Unlock()
		c.forget(ctx, id)
		return
	}
	var rec schemas.JobRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.ID == "" {
		c.log.Warn("unreadable job record ignored", "job", id, "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j, known := c.jobs[id]
	switch {
	case rec.State.Final() && !known:
		return // ended before we saw it run
	case rec.State.Final():
		j.final = true
	case rec.State != schemas.Ongoing:
		return // created: its workload is still being queued
	case !known:
		j = &job{}
		c.jobs[id] = j
	}
	j.rec = rec
	c.due[id] = struct{}{}
	c.signal()
}

func (c *Collector) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// markDue makes a known job due at once (a lifecycle event).
func (c *Collector) markDue(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.jobs[id]; ok {
		c.due[id] = struct{}{}
		c.signal()
	}
}

// markActive notes queue activity of a job; promoteActive makes it due.
func (c *Collector) markActive(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.jobs[id]; ok {
		c.active[id] = struct{}{}
	}
}

func (c *Collector) markAllDue() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.jobs {
		c.due[id] = struct{}{}
	}
	clear(c.active)
}

// promoteActive makes due the active jobs not sampled within ActivityGap.
func (c *Collector) promoteActive() {
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.active {
		if j, ok := c.jobs[id]; ok && now.Sub(j.last) >= c.cfg.ActivityGap {
			c.due[id] = struct{}{}
			delete(c.active, id)
		}
	}
}

// round samples every due job, Concurrency at a time, and publishes the
// samples; then it forgets the jobs that ended.
func (c *Collector) round(ctx context.Context) {
	c.mu.Lock()
	batch := make([]*job, 0, len(c.due))
	for id := range c.due {
		if j, ok := c.jobs[id]; ok {
			cp := *j
			batch = append(batch, &cp)
		}
	}
	clear(c.due)
	c.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	start := c.clk.Now()
	dead, err := c.deadCounts(ctx, c.prefix.Dead("*"))
	if err != nil {
		c.metrics.errors.Add(float64(len(batch)))
		c.log.Warn("round skipped", "err", err)
		return
	}
	ids := make(chan *job)
	var mu sync.Mutex
	var futures []jetstream.PubAckFuture
	var wg sync.WaitGroup
	for range min(c.cfg.Concurrency, len(batch)) {
		wg.Go(func() {
			for j := range ids {
				if f := c.collect(ctx, j, dead); f != nil {
					mu.Lock()
					futures = append(futures, f)
					mu.Unlock()
				}
			}
		})
	}
	for _, j := range batch {
		ids <- j
	}
	close(ids)
	wg.Wait()
	for _, f := range futures {
		select {
		case <-f.Ok():
			c.metrics.samples.Inc()
		case err := <-f.Err():
			c.metrics.errors.Inc()
			c.log.Warn("sample not stored", "subject", f.Msg().Subject, "err", err)
		case <-ctx.Done():
			return
		}
	}
	c.metrics.round.Observe(c.clk.Since(start).Seconds())

	var ended []string
	c.mu.Lock()
	for _, j := range batch {
		if cur, ok := c.jobs[j.rec.ID]; ok {
			cur.last = start
			if j.final {
				delete(c.jobs, j.rec.ID)
				ended = append(ended, j.rec.ID)
			}
		}
	}
	c.metrics.jobs.Set(float64(len(c.jobs)))
	c.mu.Unlock()
	for _, id := range ended {
		c.forget(ctx, id)
	}
}

// collect samples one job and publishes the sample asynchronously.
func (c *Collector) collect(ctx context.Context, j *job, dead map[string]uint64) jetstream.PubAckFuture {
	s, err := c.sample(ctx, &j.rec, dead)
	var f jetstream.PubAckFuture
	if err == nil {
		var msg *nats.Msg
		if msg, err = bus.NewMsg(ctx, c.prefix.Metrics(s.Job, schemas.RawMetrics), s); err == nil {
			f, err = c.js.PublishMsgAsync(msg)
		}
	}
	if err != nil {
		c.metrics.errors.Inc()
		if ctx.Err() == nil {
			c.log.Warn("job not sampled", "job", j.rec.ID, "err", err)
		}
		return nil
	}
	return f
}
