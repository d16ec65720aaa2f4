package collector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/pace-platform/pace/schemas"
)

// countConsumerPrefix starts the names of the consumers whose NumPending
// counts a job's results: count-<job>-<nuid>. The random end makes the name
// unguessable: tenants may create consumers on the results stream (reading
// their own results) under any name, and one who knew a counting consumer's
// name could change it; no tenant may list consumers. Names of the form
// count-<job> were made by earlier versions.
const countConsumerPrefix = "count-"

// countConsumerJob returns the job a counting consumer's name counts.
func countConsumerJob(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, countConsumerPrefix)
	if !ok {
		return "", false
	}
	if i := strings.LastIndexByte(rest, '-'); i > 0 && len(rest)-i-1 == nuidLen {
		return rest[:i], true
	}
	return rest, true
}

// nuidLen is the length of a nuid.Next().
const nuidLen = 22

// counted names the streams whose messages of a job are counted: its results,
// and the ledger of a streaming job's items (what caps its results).
var counted = []schemas.Stream{schemas.StreamResults, schemas.StreamLedger}

// counter names one counting consumer: a job's on one stream.
type counter struct {
	stream schemas.Stream
	job    string
}

// counting reports whether k has a counting consumer, or had one.
func (c *Stage) counting(k counter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.counters[k]
	return ok
}

// countName returns k's counting consumer's name, a new one when it has
// none yet.
func (c *Stage) countName(k counter) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.counters[k]
	if !ok {
		name = countConsumerPrefix + k.job + "-" + nuid.Next()
		c.counters[k] = name
	}
	return name
}

// loadCounters learns the names of the counting consumers that exist.
func (c *Stage) loadCounters(ctx context.Context) error {
	for _, family := range counted {
		st, err := c.bus.Stream(ctx, family)
		if err != nil {
			return err
		}
		names := st.ConsumerNames(ctx)
		c.mu.Lock()
		for name := range names.Name() {
			if job, ok := countConsumerJob(name); ok {
				k := counter{family, job}
				if old, dup := c.counters[k]; dup {
					c.strayCounters = append(c.strayCounters, stray{family, old}) // two for one job: keep the last
				}
				c.counters[k] = name
			}
		}
		c.mu.Unlock()
		if err := names.Err(); err != nil {
			return err
		}
	}
	return nil
}

// stray is a spare counting consumer found at start.
type stray struct {
	stream schemas.Stream
	name   string
}

// Sample reads the queue state of the job whose record is rec.
func (c *Stage) Sample(ctx context.Context, rec *schemas.JobRecord) (*schemas.Sample, error) {
	dead, err := c.deadCounts(ctx, c.prefix.Dead(rec.ID))
	if err != nil {
		return nil, err
	}
	return c.sample(ctx, rec, dead)
}

// deadCounts returns the number of dead letters per subject matching filter:
// one request for every job of a round (one subject per job).
func (c *Stage) deadCounts(ctx context.Context, filter string) (map[string]uint64, error) {
	st, err := c.bus.Stream(ctx, schemas.StreamDead)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	return info.State.Subjects, nil
}

// sample reads a job's queue state; dead holds the dead-letter counts.
func (c *Stage) sample(ctx context.Context, rec *schemas.JobRecord, dead map[string]uint64) (*schemas.Sample, error) {
	s := &schemas.Sample{
		Job: rec.ID, At: c.clk.Now(), Mode: rec.Spec.Mode, State: rec.State, Total: rec.Total,
		StartedAt: rec.StartedAt, Deadline: rec.Spec.Deadline.Time(rec.StartedAt), Replicas: rec.Replicas,
		Dead: int(dead[c.prefix.Dead(rec.ID)]), Cost: rec.Spec.Cost,
	}
	if !s.Deadline.IsZero() && !s.Deadline.After(s.StartedAt) {
		s.Deadline = time.Time{}
	}
	stream, err := c.bus.WorkStream(ctx, rec.Spec.Owner)
	if err != nil {
		return nil, err
	}
	work, err := c.js.Consumer(ctx, stream, schemas.WorkConsumer(rec.ID))
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound): // no item queued yet, or released (an idle user's stream deleted)
	case err != nil:
		return nil, fmt.Errorf("work consumer: %w", err)
	default:
		ci := work.CachedInfo()
		s.Pending, s.InFlight, s.Redelivered = int(ci.NumPending), ci.NumAckPending, ci.NumRedelivered
	}
	if s.Done, err = c.count(ctx, schemas.StreamResults, rec.ID, c.prefix.JobResults(rec.ID)); err != nil {
		return nil, err
	}
	// Only items that left the queue can be done: results for items the
	// job never had, stored until the manager sets them aside, move neither
	// its progress nor its rates meanwhile. A batch job's items are its
	// total; a streaming job's, those the ledger has entered.
	queued := rec.Total
	if s.Mode == schemas.Streaming && s.Done > 0 { // no result, nothing to cap: an idle job costs no count
		if queued, err = c.count(ctx, schemas.StreamLedger, rec.ID, c.prefix.JobLedger(rec.ID)); err != nil {
			return nil, err
		}
	}
	stored := s.Done
	s.Done = min(s.Done, max(queued-s.Pending-s.InFlight, 0))
	s.Unqueued = stored - s.Done
	s.Published = s.Pending + s.InFlight + s.Done + s.Dead
	if c.replicas != nil {
		s.Replicas = c.replicas.Count(rec.ID)
	}
	if s.Mode == schemas.Streaming && s.Pending+s.InFlight > 0 {
		st, err := c.js.Stream(ctx, stream)
		if err == nil {
			var m *jetstream.RawStreamMsg
			if m, err = st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(c.prefix.Work(rec.ID))); err == nil {
				s.Oldest = m.Time
			}
		}
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("oldest item: %w", err)
		}
	}
	return s, nil
}

// count returns the number of messages on filter in a stream: from the
// stream's subject list while they are fewer than Config.CountConsumerFrom
// (a thousand idle jobs then hold no consumer), then from the NumPending of
// a consumer that never delivers, created then.
func (c *Stage) count(ctx context.Context, family schemas.Stream, job, filter string) (int, error) {
	stream := c.prefix.Stream(family)
	k := counter{family, job}
	if !c.counting(k) {
		n, err := c.countSubjects(ctx, family, filter)
		if err != nil || n < c.cfg.CountConsumerFrom {
			return n, err
		}
	}
	name := c.countName(k)
	info, err := c.countInfo(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// A push consumer whose deliver subject no one may subscribe to:
		// it delivers nothing, so its NumPending stays the count, and the
		// server lets no one fetch from it (a tenant who could would read
		// another job's results, and spoil its count).
		var cons jetstream.PushConsumer
		cons, err = c.js.CreateOrUpdatePushConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: name, Description: "counts " + filter + " for the monitor; never delivers",
			FilterSubject: filter, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
			DeliverSubject: c.countDeliver(k), MemoryStorage: true,
		})
		if err == nil {
			info = cons.CachedInfo()
		}
	}
	if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		// The stream has its maximum of consumers (nats-server's default is
		// 1,000 per stream): count the subjects instead, one per result.
		return c.countSubjects(ctx, family, filter)
	}
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", filter, err)
	}
	return int(info.NumPending), nil
}

// countDeliver returns the subject a counting consumer would deliver to,
// were anyone allowed to subscribe: <prefix>.count.<job> for results,
// <prefix>.count.<stream>.<job> for the others.
func (c *Stage) countDeliver(k counter) string {
	if k.stream == schemas.StreamResults {
		return string(c.prefix) + ".count." + k.job
	}
	return string(c.prefix) + ".count." + strings.ToLower(string(k.stream)) + "." + k.job
}

// countInfo reads a counting consumer's info: a push consumer, or the pull
// consumer an earlier version made, kept until its job ends.
func (c *Stage) countInfo(ctx context.Context, stream, name string) (*jetstream.ConsumerInfo, error) {
	pc, err := c.js.PushConsumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrNotPushConsumer) {
		cons, err := c.js.Consumer(ctx, stream, name)
		if err != nil {
			return nil, err
		}
		return cons.CachedInfo(), nil
	}
	if err != nil {
		return nil, err
	}
	return pc.CachedInfo(), nil
}

// countSubjects counts the messages on filter from a subject-filtered
// stream info, which lists every matching subject: correct, but its cost
// grows with the job's results.
func (c *Stage) countSubjects(ctx context.Context, family schemas.Stream, filter string) (int, error) {
	st, err := c.bus.Stream(ctx, family)
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = st.Info(ctx, jetstream.WithSubjectFilter(filter)); err == nil {
			n := 0
			for _, v := range info.State.Subjects {
				n += int(v)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("count %s: %w", filter, err)
}

// forget deletes a job's counting consumers.
func (c *Stage) forget(ctx context.Context, job string) {
	for _, family := range counted {
		k := counter{family, job}
		c.mu.Lock()
		name, ok := c.counters[k]
		delete(c.counters, k)
		c.mu.Unlock()
		if ok {
			c.deleteCounter(ctx, stray{family, name})
		}
	}
}

func (c *Stage) deleteCounter(ctx context.Context, s stray) {
	err := c.js.DeleteConsumer(ctx, c.prefix.Stream(s.stream), s.name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && ctx.Err() == nil {
		c.log.Warn("counting consumer not deleted", "stream", c.prefix.Stream(s.stream), "consumer", s.name, "err", err)
	}
}

// sweep deletes the counting consumers of jobs that are not running, left
// behind when jobs ended while no collector ran, and spare ones.
func (c *Stage) sweep(ctx context.Context) {
	c.mu.Lock()
	stale := map[string]bool{}
	for k := range c.counters {
		if _, running := c.jobs[k.job]; !running {
			stale[k.job] = true
		}
	}
	spare := c.strayCounters
	c.strayCounters = nil
	c.mu.Unlock()
	for job := range stale {
		c.forget(ctx, job)
	}
	for _, s := range spare {
		c.deleteCounter(ctx, s)
	}
}
