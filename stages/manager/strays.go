package manager

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/promset"
	"github.com/pace-platform/pace/schemas"
)

// Stray items. Anyone allowed to publish on pace.work.<job> can do so
// whatever the job's state: NATS cannot refuse a publish because of a
// record in a key-value bucket, and the work stream acknowledges the item.
// Items published to a job that does not accept them (none exists, or it
// is completed, failed, stopped, terminated or in error) would stay on the
// work stream forever, so the manager moves them to the job's dead letters
// (reason refused), from where an operator can redrive them. Items of a
// created or ongoing job are never touched, nor those of a job whose stop
// was requested but which has not stopped yet: a stopping batch job drops
// its queue, a stopping streaming job drains it.

// noSuchJob is the last error of an item refused for want of its job.
const noSuchJob = "no such job"

// sighting is when a sweep first saw items of a job that did not exist,
// and the work stream's last sequence then: its items up to that sequence
// are refused once the job has not appeared for Config.StrayGrace.
type sighting struct {
	at      time.Time
	lastSeq uint64
}

// strayMetrics counts refused items and never-queued results.
type strayMetrics struct {
	refused     *prometheus.CounterVec
	neverQueued prometheus.Counter
}

func newStrayMetrics() *strayMetrics {
	return &strayMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pace_manager_items_refused_total",
			Help: "Items published to a job that did not accept them, moved to its dead letters (reason refused), " +
				"by the job's state: no_such_job, completed, failed, stopped, terminated or error.",
		}, []string{"reason"}),
		neverQueued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pace_manager_results_never_queued_total",
			Help: "Results of batch jobs for items not in their workload, moved to the jobs' dead letters (reason never_queued).",
		}),
	}
}

// Metrics returns the manager's Prometheus metrics:
// pace_manager_items_refused_total{reason} and
// pace_manager_results_never_queued_total.
func (m *Stage) Metrics() prometheus.Collector {
	return promset.Set{m.metrics.refused, m.metrics.neverQueued}
}

// setAsideNeverQueued moves a batch job's results for items it never had to
// its dead letters, so that they count for nothing.
func (m *Stage) setAsideNeverQueued(ctx context.Context, rec *schemas.JobRecord) error {
	n, err := m.bus.Queues().SetAsideNeverQueued(ctx, rec)
	if n > 0 {
		m.metrics.neverQueued.Add(float64(n))
		m.log.Warn("results for items the job never had set aside", "job", rec.ID, "results", n,
			"workload", rec.Total)
	}
	return err
}

// sweepSoon asks for a whole sweep soon: a job just stopped accepting
// items, or the ledger took in an item whose job takes none.
func (m *Stage) sweepSoon() {
	select {
	case m.sweepNow <- struct{}{}:
	default: // one is pending already
	}
}

// sweepMark is what the last whole sweep left: whether anything in it is
// to retry, and the quiet sweeps since.
type sweepMark struct {
	retry bool
	quiet int
}

// wholeSweepEvery bounds the quiet sweeps between two whole ones, should
// the ledger have missed a stray item (it was down, or behind).
const wholeSweepEvery = 30

// sweepIfDue is the sweep of a Config.StraySweep tick. Whatever comes to
// the work stream passes the ledger, which asks for a whole sweep at once
// (sweepSoon) when an item's job takes none, as does a job that ends; so
// a tick sweeps the whole stream only while items of a job with no record
// wait their grace, after a sweep that failed, and every wholeSweepEvery
// ticks. The others ask nothing of the bus.
func (m *Stage) sweepIfDue(ctx context.Context) {
	m.sweeping.Lock()
	quiet := len(m.sightings) == 0 && !m.swept.retry && m.swept.quiet < wholeSweepEvery
	if quiet {
		m.swept.quiet++
	}
	m.sweeping.Unlock()
	if !quiet {
		m.SweepStrays(ctx)
	}
}

// SweepStrays moves the items of jobs that do not accept items from the
// work stream to their jobs' dead letters (reason refused, last error
// naming why: "no such job", "job completed", …). Run calls it when a job
// ends, when the ledger takes in an item whose job takes none, and on
// Config.StraySweep ticks when due (sweepIfDue); it is safe to call
// concurrently.
//
// It costs one stream-info request and, while the work stream holds items,
// a listing of the job records (read again only when the jobs bucket
// changed) and a record read per job with items the listing lacks. Items of a
// job that has no record wait Config.StrayGrace first (counted from the
// first sweep that saw them), so that a job created just after its first
// items is not robbed of them; the items of a finished job are refused at
// once, as a finished job never runs again. Errors are logged; the next
// sweep retries.
func (m *Stage) SweepStrays(ctx context.Context) {
	m.sweeping.Lock()
	defer m.sweeping.Unlock()
	q, err := m.bus.Queues().QueuedWork(ctx)
	if err != nil {
		m.swept.retry = true
		if ctx.Err() == nil {
			m.log.Warn("stray item check failed", "err", err)
		}
		return
	}
	m.swept = sweepMark{}
	now := m.clock.Now()
	for subject := range m.sightings {
		if q.Subjects[subject] == 0 {
			delete(m.sightings, subject) // emptied, by a redrive or a purge
		}
	}
	var known map[string]*schemas.JobRecord
	for subject, n := range q.Subjects {
		if n == 0 {
			continue
		}
		if known == nil {
			if known, err = m.records(ctx); err != nil {
				m.swept.retry = true
				if ctx.Err() == nil {
					m.log.Warn("stray item check failed", "err", err)
				}
				return
			}
		}
		if err := m.sweepSubject(ctx, q.Streams[subject], subject, q.LastSeq[subject], now, known); err != nil {
			m.swept.retry = true
			if ctx.Err() == nil {
				m.log.Warn("stray item check failed", "subject", subject, "err", err)
			}
		}
	}
}

// records returns the readable job records by id, from one listing of the
// jobs bucket (which the bus reads again only when the bucket changed).
func (m *Stage) records(ctx context.Context) (map[string]*schemas.JobRecord, error) {
	all, err := m.bus.Jobs().List(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*schemas.JobRecord, len(all))
	for _, rec := range all {
		byID[rec.ID] = rec
	}
	return byID, nil
}

// sweepSubject refuses the items of subject of the work stream named
// stream if its job does not accept them; lastSeq is the stream's last
// sequence when they were counted,
// known the readable job records. A job's record is read only when known
// lacks it, to tell a missing record from an unreadable one.
func (m *Stage) sweepSubject(ctx context.Context, stream, subject string, lastSeq uint64, now time.Time, known map[string]*schemas.JobRecord) error {
	job := m.bus.Prefix().SubjectJob(subject)
	rec, err := known[job], error(nil)
	if rec == nil {
		rec, err = m.bus.Jobs().Status(ctx, job)
	}
	if m.bus.Prefix().Work(job) != subject {
		rec, err = nil, bus.ErrJobNotFound // names no valid job id: its letters go to pace.dead.unknown
	}
	switch {
	case errors.Is(err, bus.ErrJobNotFound):
		seen, ok := m.sightings[subject]
		if !ok {
			m.sightings[subject] = sighting{at: now, lastSeq: lastSeq}
			return nil
		}
		if now.Sub(seen.at) < m.cfg.StrayGrace {
			return nil
		}
		// The items seen then have waited the grace; newer ones wait theirs.
		m.sightings[subject] = sighting{at: now, lastSeq: lastSeq}
		return m.refuse(ctx, stream, subject, job, seen.lastSeq, "no_such_job", noSuchJob)
	case err != nil:
		return err // an unreadable record: the manager rebuilds it; try again then
	}
	delete(m.sightings, subject)
	if !rec.State.Final() {
		return nil // created or ongoing, stopping included
	}
	return m.refuse(ctx, stream, subject, job, lastSeq, string(rec.State), "job "+string(rec.State))
}

// refuse moves the items of subject in stream up to sequence upTo to job's
// dead letters.
func (m *Stage) refuse(ctx context.Context, stream, subject, job string, upTo uint64, reason, why string) error {
	n, err := m.bus.Queues().RefuseWork(ctx, stream, subject, upTo, why+": it does not accept items")
	if n > 0 {
		m.metrics.refused.WithLabelValues(reason).Add(float64(n))
		m.log.Warn("items refused", "job", job, "subject", subject, "items", n, "reason", why)
	}
	return err
}

// refuseStrays refuses every item left on a finished job's queue, when
// its resources are released.
func (m *Stage) refuseStrays(ctx context.Context, rec *schemas.JobRecord) error {
	stream, err := m.bus.WorkStream(ctx, rec.Spec.Owner)
	if err != nil {
		return err
	}
	return m.refuse(ctx, stream, m.bus.Prefix().Work(rec.ID), rec.ID, ^uint64(0), string(rec.State), "job "+string(rec.State))
}
