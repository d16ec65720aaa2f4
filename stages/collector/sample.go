package collector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// countConsumerPrefix names the never-fetched consumers whose NumPending
// counts a job's results and dead letters.
const countConsumerPrefix = "count-"

// Stream families the collector reads (see bus/provision.go).
const (
	workFamily    = "WORK"
	resultsFamily = "RESULTS"
	deadFamily    = "DEAD"
)

// Sample reads the queue state of the job whose record is rec.
func (c *Collector) Sample(ctx context.Context, rec *schemas.JobRecord) (*schemas.Sample, error) {
	dead, err := c.deadCounts(ctx, c.prefix.Dead(rec.ID))
	if err != nil {
		return nil, err
	}
	return c.sample(ctx, rec, dead)
}

// deadCounts returns the number of dead letters per subject matching filter:
// one request for every job of a round (one subject per job).
func (c *Collector) deadCounts(ctx context.Context, filter string) (map[string]uint64, error) {
	st, err := c.js.Stream(ctx, c.prefix.Stream(deadFamily))
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	return info.State.Subjects, nil
}

// sample reads a job's queue state; dead holds the dead-letter counts.
func (c *Collector) sample(ctx context.Context, rec *schemas.JobRecord, dead map[string]uint64) (*schemas.Sample, error) {
	s := &schemas.Sample{
		Job: rec.ID, At: c.clk.Now(), Mode: rec.Spec.Mode, State: rec.State, Total: rec.Total,
		StartedAt: rec.StartedAt, Deadline: rec.Spec.Deadline.Time(rec.StartedAt), Replicas: rec.Replicas,
		Dead: int(dead[c.prefix.Dead(rec.ID)]),
	}
	if !s.Deadline.IsZero() && !s.Deadline.After(s.StartedAt) {
		s.Deadline = time.Time{}
	}
	work, err := c.js.Consumer(ctx, c.prefix.Stream(workFamily), "work-"+rec.ID)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound): // no item queued yet, or released
	case err != nil:
		return nil, fmt.Errorf("work consumer: %w", err)
	default:
		ci := work.CachedInfo()
		s.Pending, s.InFlight, s.Redelivered = int(ci.NumPending), ci.NumAckPending, ci.NumRedelivered
	}
	if s.Done, err = c.count(ctx, resultsFamily, rec.ID, c.prefix.JobResults(rec.ID)); err != nil {
		return nil, err
	}
	s.Published = s.Pending + s.InFlight + s.Done + s.Dead
	if c.replicas != nil {
		s.Replicas = c.replicas.Count(rec.ID)
	}
	if s.Mode == schemas.Streaming && s.Pending+s.InFlight > 0 {
		st, err := c.workStream(ctx)
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

// workStream returns the work stream's handle, looked up once.
func (c *Collector) workStream(ctx context.Context) (jetstream.Stream, error) {
	c.mu.Lock()
	st := c.work
	c.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := c.js.Stream(ctx, c.prefix.Stream(workFamily))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.work = st
	c.mu.Unlock()
	return st, nil
}

// count returns the number of messages on filter in a stream, from the
// NumPending of a consumer that is never fetched, creating it on first use.
func (c *Collector) count(ctx context.Context, family, job, filter string) (int, error) {
	stream, name := c.prefix.Stream(family), countConsumerPrefix+job
	cons, err := c.js.Consumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = c.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: name, Description: "counts " + filter + " for the monitor; never fetched",
			FilterSubject: filter, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
			MemoryStorage: true,
		})
	}
	if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		// The stream has its maximum of consumers (nats-server's default is
		// 1,000 per stream): count the subjects instead, one per result.
		return c.countSubjects(ctx, stream, filter)
	}
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", filter, err)
	}
	return int(cons.CachedInfo().NumPending), nil
}

// countSubjects counts the messages on filter from a subject-filtered
// stream info, which lists every matching subject: correct, but its cost
// grows with the job's results.
func (c *Collector) countSubjects(ctx context.Context, stream, filter string) (int, error) {
	st, err := c.js.Stream(ctx, stream)
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

// forget deletes a job's counting consumer.
func (c *Collector) forget(ctx context.Context, job string) {
	err := c.js.DeleteConsumer(ctx, c.prefix.Stream(resultsFamily), countConsumerPrefix+job)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && ctx.Err() == nil {
		c.log.Warn("counting consumer not deleted", "job", job, "err", err)
	}
}

// sweep deletes the counting consumers of jobs that are not running, left
// behind when jobs ended while no collector ran.
func (c *Collector) sweep(ctx context.Context) {
	st, err := c.js.Stream(ctx, c.prefix.Stream(resultsFamily))
	if err != nil {
		c.log.Warn("counting consumers not swept", "err", err)
		return
	}
	names := st.ConsumerNames(ctx)
	var stale []string
	for name := range names.Name() {
		job, ok := strings.CutPrefix(name, countConsumerPrefix)
		c.mu.Lock()
		_, running := c.jobs[job]
		c.mu.Unlock()
		if ok && !running {
			stale = append(stale, job)
		}
	}
	for _, job := range stale {
		c.forget(ctx, job)
	}
}
