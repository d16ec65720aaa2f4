package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/consume"
	"github.com/pace-platform/pace/internal/heartbeat"
	"github.com/pace-platform/pace/schemas"
)

// Replicas tells how many workers a job has; *bus.Presence implements it.
type Replicas interface {
	Count(job string) int
}

// Stage is the collector: it samples running jobs. Create it with New and run
// it with Run.
type Stage struct {
	bus      Bus
	js       jetstream.JetStream
	nc       *nats.Conn
	prefix   schemas.Prefix
	cfg      Config
	clk      clock.WithTicker
	log      *slog.Logger
	replicas Replicas
	metrics  *Metrics

	more     chan struct{} // buffered 1: a task was queued
	activity chan struct{} // buffered 1: a job had queue activity, none before it since the last promotion

	mu   sync.Mutex
	jobs map[string]*job // running jobs, and final ones awaiting their last sample; guarded by mu
	// counters names each job's counting consumer; strayCounters are
	// spare ones found at start, deleted by the sweep. Guarded by mu.
	counters      map[counter]string
	strayCounters []stray
	active        map[string]struct{} // jobs with queue activity since their last sample; guarded by mu
	// Tasks: urgent jobs (events, activity) go before the interval's bulk,
	// so that one job's change is not stuck behind a round of every job.
	urgent, bulk []string
	queued       map[string]bool   // job → queued (in urgent or bulk); guarded by mu
	bulkDead     map[string]uint64 // dead-letter counts of the current round; guarded by mu
	roundLeft    int               // bulk samples of the current round not yet done; guarded by mu
	roundStart   time.Time         // guarded by mu
	roundDone    chan struct{}     // closed when the current round ends; guarded by mu
	takes        uint64            // tasks taken, to alternate urgent and bulk; guarded by mu
	rounds       uint64            // rounds started; guarded by mu
}

// job is what the collector knows of one job.
type job struct {
	rec   schemas.JobRecord
	final bool // reached a final state: sample once more, then forget
	// sampling counts the samples of the job taken and not yet done; a
	// round does not queue a job being sampled.
	sampling int
	last     time.Time // last sample
	// A job whose samples do not change is sampled every `every` rounds
	// (see wait): skip is the rounds left to skip, seen what its last
	// sample counted.
	skip, every int
	seen        sampleCounts
}

// maxIdleRounds and maxQuietRounds bound the rounds between two samples of
// a job whose counts do not change (30 s and 5 minutes at the default 1 s
// interval); see wait.
const (
	maxIdleRounds  = 30
	maxQuietRounds = 300
)

// wait is the rounds until the next sample of rec's job, whose last two
// samples counted counts, now, after a wait of every rounds.
//
// With queue activity sampling on (ActivityGap > 0), whatever changes a
// job's counts samples it at once (an event, an item queued, a result, a
// ledger entry, a dead letter): what remains to sample for is time alone, so the job waits
// its longestWait at once (done puts a quiet job's heartbeat on a phase of
// its own, heartbeat.Next). Without it, the wait doubles up to
// maxIdleRounds, so that a change is seen within that many rounds.
func (c *Stage) wait(rec *schemas.JobRecord, counts sampleCounts, every int, now time.Time) int {
	if c.cfg.ActivityGap <= 0 {
		return min(2*every, maxIdleRounds)
	}
	return c.longestWait(rec, counts, now)
}

// longestWait is how long time alone may leave unseen rec's job, whose
// samples count counts, now, in rounds. A job with a cost and workers is
// sampled every round: its cost accrues with time. A quiet job, with no item queued or
// in flight or no worker, waits maxQuietRounds: time changes nothing its
// controller or its dashboards need to see. A job with work and workers
// whose counts stand still (workers that hang) waits maxIdleRounds, as time
// alone may call for a decision then; with a deadline, up to a hundredth
// of the time left to it, so that its controller sees at least every 1 %
// of the time it has left.
func (c *Stage) longestWait(rec *schemas.JobRecord, counts sampleCounts, now time.Time) int {
	if rec.Spec.Cost != nil && max(counts.repls, rec.Replicas) > 0 {
		return 1 // what its workers use, and so its cost, changes with time alone
	}
	if counts.pending+counts.inFlight == 0 || counts.repls == 0 {
		return maxQuietRounds
	}
	if due := rec.Spec.Deadline.Time(rec.StartedAt); !due.IsZero() && !rec.StartedAt.IsZero() {
		return min(max(int(due.Sub(now)/100/c.cfg.Interval), maxIdleRounds), maxQuietRounds)
	}
	return maxIdleRounds
}

// sampleCounts is what tells two samples of a job apart but for time.
type sampleCounts struct {
	state                                             schemas.JobState
	pending, inFlight, done, dead, redelivered, repls int
}

func countsOf(s *schemas.Sample) sampleCounts {
	return sampleCounts{s.State, s.Pending, s.InFlight, s.Done, s.Dead, s.Redelivered, s.Replicas}
}

// Bus is what the collector needs of the bus; *bus.Client implements it.
type Bus interface {
	JetStream() jetstream.JetStream
	Conn() *nats.Conn
	Prefix() schemas.Prefix
	// Stream returns a handle on a stream of the bus, looked up once.
	Stream(ctx context.Context, family schemas.Stream) (jetstream.Stream, error)
	// WorkStream names the stream holding the items of an owner's jobs.
	WorkStream(ctx context.Context, owner string) (string, error)
	// Letters keeps a job record it cannot read (Letters.Publish).
	Letters() bus.Letters
}

// Option configures a Stage.
type Option func(*Stage)

// WithReplicas counts a job's workers with r; by default a sample takes the
// job record's replica count.
func WithReplicas(r Replicas) Option { return func(c *Stage) { c.replicas = r } }

// WithClock sets the clock (default: the real one).
func WithClock(clk clock.WithTicker) Option { return func(c *Stage) { c.clk = clk } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *Stage) { c.log = l } }

// Deps is what the stage works on.
type Deps struct {
	Bus Bus
}

// New returns a collector publishing on deps.Bus.
func New(deps Deps, cfg Config, opts ...Option) (*Stage, error) {
	c := deps.Bus
	if c == nil {
		return nil, errors.New("collector: Deps.Bus is nil")
	}
	cfg = cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("collector config: %w", errs.ToAggregate())
	}
	done := make(chan struct{})
	close(done)
	col := &Stage{
		bus: c, js: c.JetStream(), nc: c.Conn(), prefix: c.Prefix(), cfg: cfg, clk: clock.RealClock{},
		log: slog.New(slog.DiscardHandler), metrics: NewMetrics(), more: make(chan struct{}, 1), activity: make(chan struct{}, 1),
		jobs: map[string]*job{}, active: map[string]struct{}{}, counters: map[counter]string{}, queued: map[string]bool{}, roundDone: done,
	}
	for _, opt := range opts {
		opt(col)
	}
	col.log = col.log.With("stage", "collector")
	return col, nil
}

// Metrics returns the collector's Prometheus metrics.
func (c *Stage) Metrics() *Metrics { return c.metrics }

// Run samples jobs until ctx ends; cancellation returns nil.
func (c *Stage) Run(ctx context.Context) error {
	kv, err := c.js.KeyValue(ctx, c.prefix.Bucket(schemas.BucketJobs))
	if err != nil {
		return fmt.Errorf("jobs bucket (was the bus provisioned?): %w", err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := consume.Updates(wctx, kv, ">")
	if err := c.loadCounters(ctx); err != nil {
		return fmt.Errorf("counting consumers: %w", err)
	}

	// Job events make a job due at once, but for Pace's own scaled events;
	// queue activity within ActivityGap.
	subjects := map[string]func(tokens []string){c.prefix.Jobs("*", "*"): c.onEvent}
	if c.cfg.ActivityGap > 0 {
		// The ledger's entries too: a streaming job's done count is capped by
		// them, and the ledger may enter items after their results came.
		for _, s := range []string{c.prefix.Work("*"), c.prefix.Results("*", "*"), c.prefix.Ledger("*", "*"), c.prefix.Dead("*")} {
			subjects[s] = func(tokens []string) { c.markActive(tokens[2]) }
		}
	}
	for subject, mark := range subjects {
		sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
			if tokens := strings.Split(m.Subject, "."); len(tokens) > 2 {
				mark(tokens)
			}
		})
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subject, err)
		}
		_ = sub.SetPendingLimits(-1, 64<<20)
		defer sub.Unsubscribe() //nolint:errcheck // ending a subscription
	}

	wctx, stopWorkers := context.WithCancel(ctx)
	wait := c.startWorkers(wctx)
	defer wait()
	defer stopWorkers()

	tick := c.clk.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	// The activity gap's timer runs only from a job's queue activity to
	// its promotion: idle, the collector wakes once an interval.
	var (
		gap      <-chan time.Time
		gapTimer clock.Timer
	)
	defer func() {
		if gapTimer != nil {
			gapTimer.Stop()
		}
	}()
	c.log.Info("collector started", "interval", c.cfg.Interval, "activity_gap", c.cfg.ActivityGap)
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-watch:
			switch {
			case !ok: // ctx ended
				return nil
			case u.Err != nil:
				return u.Err
			case u.Entry == nil: // every stored record has been seen
				c.sweep(ctx)
			default:
				c.apply(ctx, u.Entry)
			}
		case <-tick.C():
			c.startRound(ctx)
		case <-c.activity:
			if gap == nil {
				gapTimer = c.clk.NewTimer(c.cfg.ActivityGap)
				gap = gapTimer.C()
			}
		case <-gap:
			gap = nil
			c.promoteActive()
		}
	}
}

// startWorkers starts Concurrency sampling goroutines and an acknowledger
// of their publishes; the returned func waits for them after ctx ends.
func (c *Stage) startWorkers(ctx context.Context) (wait func()) {
	futures := make(chan jetstream.PubAckFuture, 4096)
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() { c.worker(ctx, futures) })
	}
	acked := make(chan struct{})
	go func() {
		defer close(acked)
		for f := range futures {
			select {
			case <-f.Ok():
				c.metrics.samples.Inc()
			case err := <-f.Err():
				c.metrics.errors.Inc()
				c.log.Warn("sample not stored", "subject", f.Msg().Subject, "err", err)
			}
		}
	}()
	return func() {
		wg.Wait()
		close(futures)
		<-acked
	}
}

// apply follows one change of the jobs bucket.
func (c *Stage) apply(ctx context.Context, e jetstream.KeyValueEntry) {
	id := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		c.mu.Lock()
		delete(c.jobs, id)
		c.mu.Unlock()
		c.forget(ctx, id)
		return
	}
	rec, err := readRecord(e)
	if err != nil {
		c.setAside(ctx, e, err)
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
	case replicasOnly(j.rec, rec):
		// Pace's own actuation (a scaled event applied to the record): the
		// next interval sample sees the new count. Sampling at once would
		// start a new decision cycle on every actuation (issue 19).
		j.rec, j.skip, j.every = rec, 0, 1
		return
	}
	j.rec = rec
	c.queueUrgentLocked(id)
}

// replicasOnly reports whether next differs from prev in its replica count
// and event sequence only.
func replicasOnly(prev, next schemas.JobRecord) bool {
	prev.Replicas, prev.Seq = next.Replicas, next.Seq
	a, errA := json.Marshal(prev)
	b, errB := json.Marshal(next)
	return errA == nil && errB == nil && string(a) == string(b)
}

// readRecord decodes a job record entry. Only what the collector relies on
// is checked (the id, the state): a record written under other bounds of
// its spec is still sampled.
func readRecord(e jetstream.KeyValueEntry) (schemas.JobRecord, error) {
	var rec schemas.JobRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, fmt.Errorf("%w: job_record: %w", bus.ErrMalformed, err)
	}
	if rec.ID != e.Key() {
		return rec, fmt.Errorf("%w: job_record: id %q under key %q", bus.ErrMalformed, rec.ID, e.Key())
	}
	if !slices.Contains(schemas.JobStates, rec.State) {
		return rec, fmt.Errorf("%w: job_record: unknown state %q", bus.ErrMalformed, rec.State)
	}
	return rec, nil
}

// setAside counts an unreadable job record and keeps a copy as a dead
// letter on pace.metrics.<job>.dead; the record itself stays in its bucket.
// Each revision is kept once, however often it is read.
func (c *Stage) setAside(ctx context.Context, e jetstream.KeyValueEntry, cause error) {
	c.metrics.malformed.Inc()
	job := e.Key()
	if !schemas.ValidToken(job) {
		job = "unknown"
	}
	d := bus.MalformedLetter(job, "$KV."+e.Bucket()+"."+e.Key(), e.Value(), nil, cause, c.clk.Now())
	d.Sequence = e.Revision()
	key := fmt.Sprintf("collector/%s/%d", e.Bucket(), e.Revision())
	log := c.log.With("job", e.Key(), "revision", e.Revision(), "err", cause)
	if err := c.bus.Letters().Publish(ctx, c.prefix.Metrics(job, schemas.DeadMetrics), d, key); err != nil {
		log.Error("unreadable job record not dead-lettered; it stays in its bucket", "dead_letter_err", err)
		return
	}
	log.Warn("unreadable job record ignored and dead-lettered")
}

func (c *Stage) signal() {
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// queueUrgentLocked queues a job ahead of the interval's bulk.
func (c *Stage) queueUrgentLocked(id string) {
	if !c.queued[id] {
		c.queued[id] = true
		c.urgent = append(c.urgent, id)
		c.signal()
	}
}

// onEvent follows a job event, pace.jobs.<job>.<type>: a lifecycle event
// makes the job due at once; a scaled event does not, as it reports Pace's
// own actuation, and sampling on it would make every decision's effect the
// cause of the next decision.
func (c *Stage) onEvent(tokens []string) {
	if len(tokens) > 3 && tokens[3] == string(schemas.EventScaled) {
		return
	}
	c.markDue(tokens[2])
}

// markDue queues a known job at once (a lifecycle event).
func (c *Stage) markDue(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j, ok := c.jobs[id]; ok {
		j.skip, j.every = 0, 1
		c.queueUrgentLocked(id)
	}
}

// markActive notes queue activity of a job; promoteActive queues it.
func (c *Stage) markActive(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j, ok := c.jobs[id]; ok {
		j.skip, j.every = 0, 1
		if len(c.active) == 0 {
			select { // the first activity since the last promotion arms the gap
			case c.activity <- struct{}{}:
			default:
			}
		}
		c.active[id] = struct{}{}
	}
}

// promoteActive queues the jobs with queue activity since the last
// promotion, an ActivityGap after the first of it: at most one activity
// sample per job per gap.
func (c *Stage) promoteActive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.active {
		if _, ok := c.jobs[id]; ok {
			c.queueUrgentLocked(id)
		}
	}
	clear(c.active)
}

// startRound queues every running job not queued yet, with the dead-letter
// counts of all jobs read in one request. A job still queued or being
// sampled since an earlier round is not queued twice: an overloaded
// collector samples less often, and a slow sample does not make its job
// due again before it has counted.
func (c *Stage) startRound(ctx context.Context) {
	var dead map[string]uint64 // nil when no job is due: a job that becomes due reads its own
	if c.anyDue() {
		var err error
		if dead, err = c.deadCounts(ctx, c.prefix.Dead("*")); err != nil {
			c.metrics.errors.Inc()
			if ctx.Err() == nil {
				c.log.Warn("round skipped", "err", err)
			}
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bulkDead = dead
	c.rounds++
	if c.roundLeft == 0 {
		c.roundStart = c.clk.Now()
		c.roundDone = make(chan struct{})
	}
	for id, j := range c.jobs {
		if j.skip > 0 && !j.final {
			j.skip--
			continue
		}
		if !c.queued[id] && j.sampling == 0 {
			c.queued[id] = true
			c.bulk = append(c.bulk, id)
			c.roundLeft++
		}
	}
	clear(c.active)
	if c.roundLeft == 0 {
		close(c.roundDone)
	}
	c.metrics.jobs.Set(float64(len(c.jobs)))
	c.signal()
}

// anyDue reports whether a round started now would queue a job.
func (c *Stage) anyDue() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, j := range c.jobs {
		if (j.skip == 0 || j.final) && !c.queued[id] && j.sampling == 0 {
			return true
		}
	}
	return false
}

// take returns the next job to sample, urgent ones first; dead is nil for
// an urgent job (its dead letters are read with it).
func (c *Stage) take() (id string, dead map[string]uint64, bulk, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.takes++
	switch {
	case len(c.urgent) > 0 && (len(c.bulk) == 0 || c.takes%2 == 0): // bulk keeps half the workers when both wait
		id, c.urgent = c.urgent[0], c.urgent[1:]
	case len(c.bulk) > 0:
		id, c.bulk, dead, bulk = c.bulk[0], c.bulk[1:], c.bulkDead, true
	default:
		return "", nil, false, false
	}
	delete(c.queued, id)
	if j, ok := c.jobs[id]; ok {
		j.sampling++
	}
	if len(c.urgent)+len(c.bulk) > 0 {
		c.signal() // wake another worker
	}
	return id, dead, bulk, true
}

// worker samples queued jobs until ctx ends.
func (c *Stage) worker(ctx context.Context, futures chan<- jetstream.PubAckFuture) {
	for ctx.Err() == nil {
		id, dead, bulk, ok := c.take()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-c.more:
			}
			continue
		}
		c.mu.Lock()
		j, known := c.jobs[id]
		var rec schemas.JobRecord
		var final bool
		if known {
			rec, final = j.rec, j.final
		}
		c.mu.Unlock()
		var s *schemas.Sample
		if known {
			var f jetstream.PubAckFuture
			if f, s = c.collect(ctx, &rec, dead); f != nil {
				futures <- f
			}
		}
		c.done(ctx, id, final, bulk, s)
	}
}

// done records a job's sample s (nil: none was taken) and forgets the job
// after its final one; a job whose counts did not change since its last
// sample waits twice as many rounds for its next.
func (c *Stage) done(ctx context.Context, id string, final, bulk bool, s *schemas.Sample) {
	now := c.clk.Now()
	c.mu.Lock()
	if j, ok := c.jobs[id]; ok {
		j.last = now
		j.sampling = max(j.sampling-1, 0)
		if s != nil {
			if counts := countsOf(s); counts == j.seen && j.every > 0 {
				j.every = c.wait(&j.rec, counts, j.every, now)
			} else {
				j.every, j.seen = 1, counts
			}
			j.skip = j.every - 1
			if j.every == maxQuietRounds {
				j.skip = heartbeat.Next(id, c.rounds, maxQuietRounds) - 1
			}
		}
		if final {
			delete(c.jobs, id)
		}
	}
	if bulk && c.roundLeft > 0 {
		if c.roundLeft--; c.roundLeft == 0 {
			c.metrics.round.Observe(now.Sub(c.roundStart).Seconds())
			close(c.roundDone)
		}
	}
	c.mu.Unlock()
	if final {
		c.forget(ctx, id)
	}
}

// collect samples one job and publishes the sample asynchronously; dead
// nil reads the job's dead letters with it. It returns the publish and the
// sample, both nil when the job could not be sampled.
func (c *Stage) collect(ctx context.Context, rec *schemas.JobRecord, dead map[string]uint64) (jetstream.PubAckFuture, *schemas.Sample) {
	var s *schemas.Sample
	var err error
	if dead == nil {
		s, err = c.Sample(ctx, rec)
	} else {
		s, err = c.sample(ctx, rec, dead)
	}
	var f jetstream.PubAckFuture
	if err == nil {
		var msg *nats.Msg
		pctx := ctx
		if rec.Trace != "" { // the sample, its progress and decisions belong to the job's trace
			pctx = bus.WithTraceparent(ctx, rec.Trace)
		}
		if msg, err = bus.NewMsg(pctx, c.prefix.Metrics(s.Job, schemas.RawMetrics), s); err == nil {
			var opts []jetstream.PublishOpt
			if c.cfg.RawTTL > 0 {
				opts = append(opts, jetstream.WithMsgTTL(c.cfg.RawTTL))
			}
			f, err = c.js.PublishMsgAsync(msg, opts...)
		}
	}
	if err != nil {
		c.metrics.errors.Inc()
		if ctx.Err() == nil {
			c.log.Warn("job not sampled", "job", rec.ID, "err", err)
		}
		return nil, nil
	}
	return f, s
}
