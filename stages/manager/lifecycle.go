package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/tracing"
	"github.com/pace-platform/pace/schemas"
)

// emit records ev (bus.Jobs.RecordEvent) and logs it on the job's log.
func (m *Stage) emit(ctx context.Context, ev *schemas.JobEvent) (*schemas.JobRecord, error) {
	if ev.At.IsZero() {
		ev.At = m.clock.Now()
	}
	rec, err := m.bus.Jobs().RecordEvent(ctx, ev)
	m.wake(ev.Job)
	if err != nil {
		return nil, err
	}
	line := string(ev.Type)
	if ev.Reason != "" {
		line += ": " + ev.Reason
	}
	if err := m.bus.Outputs().PublishLog(ctx, &schemas.LogLine{Job: ev.Job, At: ev.At, Source: "manager", Line: line}); err != nil {
		m.log.Warn("job log line lost", "job", ev.Job, "err", err)
	}
	return rec, nil
}

// Job returns a job the user may see.
func (m *Stage) Job(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	// Other users' jobs are not revealed, not even their existence.
	rec, err := m.bus.Jobs().StatusSeen(ctx, id, m.callerOf(u).sees)
	if errors.Is(err, bus.ErrJobNotFound) {
		return nil, apiError(http.StatusNotFound, "job %s not found", id)
	}
	return rec, err
}

// Jobs returns the jobs the user may see.
func (m *Stage) Jobs(ctx context.Context, u auth.User) ([]*schemas.JobRecord, error) {
	return m.bus.Jobs().ListSeen(ctx, m.callerOf(u).sees)
}

// changer returns the job for a state-changing request, refusing anonymous
// callers when the API is not open.
func (m *Stage) changer(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	if m.refusesAnonymous(u) {
		return nil, apiError(http.StatusUnauthorized, "changing a job needs credentials")
	}
	return m.Job(ctx, u, id)
}

// Declare makes job id exist for the caller: created as a streaming job
// without workers (the caller pushes and processes its items), or, when it
// exists, confirmed as the caller's and still accepting items. It is what
// the SDK's OpenJob asks over NATS (pace.control.declare) for a connection
// that may not write job records, a tenant's on a bus that authenticates.
// Another user's job is a conflict: its id is taken.
func (m *Stage) Declare(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	if m.refusesAnonymous(u) {
		return nil, apiError(http.StatusUnauthorized, "declaring a job needs credentials")
	}
	if !schemas.ValidToken(id) {
		return nil, invalidAs("request", field.ErrorList{field.Invalid(field.NewPath("job_id"), id,
			"must be 1-128 letters, digits, '-' or '_'")})
	}
	m.mu.Lock()
	busy := m.submitting[id]
	m.mu.Unlock()
	if busy {
		return nil, apiError(http.StatusConflict, "job %s is being created; try again", id)
	}
	rec, err := m.bus.Jobs().Status(ctx, id)
	switch {
	case errors.Is(err, bus.ErrJobNotFound):
		spec := schemas.JobSpec{Mode: schemas.Streaming, Owner: u.Name}.WithDefaults()
		sub := &submission{spec: spec, owner: m.callerOf(u), format: FormatPace}
		if err := m.admit(ctx, sub); err != nil {
			return nil, err
		}
		rec, err = m.createAs(ctx, id, sub)
		if err == nil {
			m.log.Info("job declared", "job", id, "owner", u.Name)
		}
		return rec, err
	case err != nil:
		return nil, err
	case !m.callerOf(u).owns(rec):
		return nil, apiError(http.StatusConflict, "job id %s is taken", id)
	case rec.State.Final() || rec.StopRequested:
		return nil, apiError(http.StatusConflict, "job %s is %s: it takes no items", id, rec.State)
	}
	// Callers may not create the work consumer their workers fetch from.
	if err := m.bus.Queues().EnsureWork(ctx, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// Stop stops a job: a batch job's queued items are dropped, a streaming job
// takes no new items; items in flight finish, then the job is stopped.
func (m *Stage) Stop(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	rec, err := m.changer(ctx, u, id)
	if err != nil {
		return nil, err
	}
	if rec.State.Final() {
		return nil, apiError(http.StatusConflict, "job %s is already %s", id, rec.State)
	}
	if rec.StopRequested {
		return rec, nil
	}
	rec, err = m.emit(ctx, &schemas.JobEvent{Job: id, Type: schemas.EventStopping, State: rec.State,
		Reason: "stop requested by " + u.Name})
	if err != nil {
		return nil, err
	}
	if rec.Spec.Mode == schemas.Batch {
		if _, err := m.bus.Queues().DropQueued(ctx, id); err != nil {
			return nil, err
		}
	}
	m.log.Info("job stopping", "job", id, "by", u.Name)
	return rec, nil
}

// Terminate ends a job at once: its queue is released and actuators
// delete its workers on the terminated event.
func (m *Stage) Terminate(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	rec, err := m.changer(ctx, u, id)
	if err != nil {
		return nil, err
	}
	if rec.State.Final() {
		return nil, apiError(http.StatusConflict, "job %s is already %s", id, rec.State)
	}
	mode := rec.Spec.Mode
	rec, err = m.emit(ctx, &schemas.JobEvent{Job: id, Type: schemas.EventTerminated, State: schemas.Terminated,
		Reason: "terminated by " + u.Name})
	if err != nil {
		return nil, err
	}
	m.log.Info("job terminated", "job", id, "by", u.Name)
	// Its queue goes with its consumer: the items the ledger has taken in
	// at once (a batch job's all, by a purge). A streaming job's items the
	// ledger has yet to see stay, for the ledger to enter and the stray
	// sweep to settle: those processed meanwhile keep their results, the
	// others are refused.
	release := m.bus.Queues().ReleaseWork
	if mode != schemas.Batch {
		release = m.bus.Queues().DeleteWorkConsumer
	}
	if err := release(ctx, id); err != nil {
		m.log.Warn("terminated job's queue not released; its clean-up will", "job", id, "err", err)
	}
	m.sweepSoon()
	return rec, nil
}

// Delete removes a finished job and everything stored about it. A job
// that is not finished is refused with 409.
func (m *Stage) Delete(ctx context.Context, u auth.User, id string) error {
	rec, err := m.changer(ctx, u, id)
	if err != nil {
		return err
	}
	if !rec.State.Final() {
		return apiError(http.StatusConflict, "job %s is %s: stop or terminate it before deleting it", id, rec.State)
	}
	if err := m.bus.Queues().PurgeJob(ctx, id); err != nil {
		return err
	}
	if _, err := m.bus.Jobs().PublishEvent(ctx, &schemas.JobEvent{Job: id, Type: schemas.EventDeleted, State: rec.State,
		At: m.clock.Now(), Reason: "deleted by " + u.Name}); err != nil {
		m.log.Warn("deleted event lost", "job", id, "err", err)
	}
	m.log.Info("job deleted", "job", id, "by", u.Name)
	return nil
}

// DeleteFinished deletes every finished job the user may change and
// returns the ids deleted and those kept (still running).
func (m *Stage) DeleteFinished(ctx context.Context, u auth.User) (deleted, kept []string, err error) {
	if m.refusesAnonymous(u) {
		return nil, nil, apiError(http.StatusUnauthorized, "deleting jobs needs credentials")
	}
	jobs, err := m.Jobs(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range jobs {
		if !rec.State.Final() {
			kept = append(kept, rec.ID)
			continue
		}
		if err := m.Delete(ctx, u, rec.ID); err != nil {
			return deleted, kept, err
		}
		deleted = append(deleted, rec.ID)
	}
	return deleted, kept, nil
}

// Run recovers the jobs' records from their events, serves submissions and
// commands over NATS, keeps the ledger of streaming jobs' items, checks
// jobs every Config.Interval (see Reconcile) and the work stream for stray
// items every Config.StraySweep and when a job ends (see SweepStrays),
// until ctx ends; cancellation, even during recovery, returns nil. Job
// checks and sweeps run apart, so that neither waits for the other, and a
// pass does not wait for a job still being checked since an earlier one.
func (m *Stage) Run(ctx context.Context) error {
	if err := m.Recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while recovering: cancellation is how it stops
		}
		return err
	}
	stopNATS, err := m.serveNATS(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer stopNATS()
	// The checks the passes started are waited for once the passes (in
	// loops) have ended: a pass still starting checks while Wait runs would
	// leave them running after Run returns.
	defer m.checking.Wait()
	var loops sync.WaitGroup
	defer loops.Wait()
	loops.Go(func() { m.keepLedger(ctx) })
	loops.Go(func() { m.sweepStrays(ctx) })
	t := m.clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	var passing atomic.Bool // a pass is starting checks
	pass := func() {
		if !passing.CompareAndSwap(false, true) {
			return // the last pass still waits for a free slot: this one would only queue behind it
		}
		loops.Go(func() {
			defer passing.Store(false)
			m.reconcile(ctx, false)
		})
	}
	pass()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			pass()
		}
	}
}

// sweepStrays sweeps the work stream for stray items when asked
// (sweepSoon) and on every Config.StraySweep tick that is due (sweepIfDue),
// until ctx ends. One asked sweep runs at once per tick; a second ask
// waits for the next tick, so that a flood of stray items costs a whole
// sweep a tick, not back-to-back ones.
func (m *Stage) sweepStrays(ctx context.Context) {
	sweep := m.clock.NewTicker(m.cfg.StraySweep)
	defer sweep.Stop()
	run, asked, pending := (*Stage).SweepStrays, false, false
	for {
		if run != nil {
			sctx, cancel := context.WithTimeout(ctx, m.cfg.CheckTimeout)
			run(m, sctx)
			cancel()
		}
		run = nil
		select {
		case <-ctx.Done():
			return
		case <-sweep.C():
			asked, run = false, (*Stage).sweepIfDue
			if pending {
				pending, run = false, (*Stage).SweepStrays
			}
		case <-m.sweepNow:
			if asked {
				pending = true
			} else {
				asked, run = true, (*Stage).SweepStrays
			}
		}
	}
}

// Recover applies every stored event that a record has not seen yet, so
// that records lost or behind (a crash between event and update) catch up.
func (m *Stage) Recover(ctx context.Context) error {
	applied := 0
	for ev, err := range m.bus.Jobs().Events(ctx, "", false) {
		if err != nil {
			return fmt.Errorf("recover jobs: %w", err)
		}
		changed := false
		_, err := m.bus.Jobs().Update(ctx, ev.Job, func(cur *schemas.JobRecord) (*schemas.JobRecord, error) {
			if ev.Type == schemas.EventDeleted {
				return nil, nil
			}
			next := schemas.ApplyEvent(cur, ev.JobEvent, ev.Seq)
			changed = next != nil
			return next, nil
		})
		if err != nil {
			return fmt.Errorf("recover job %s: %w", ev.Job, err)
		}
		if changed {
			applied++
		}
	}
	m.log.Info("jobs recovered", "events_applied", applied)
	return nil
}

// Reconcile checks every job once: running jobs for completion or a
// drained stop, jobs interrupted while being created, and finished jobs
// due for cleanup. It returns once each check has ended, waiting first for
// the check of a job that is being checked already. Errors are logged; the
// next pass retries.
func (m *Stage) Reconcile(ctx context.Context) { m.reconcile(ctx, true) }

// reconcile starts a check of every job that needs one, at most
// Config.CheckConcurrency at a time, each bounded by Config.CheckTimeout,
// so that a job whose checks hang costs the others one slot at most. A job
// being checked already is waited for with wait, skipped without it; with
// wait, reconcile returns once its checks have ended.
func (m *Stage) reconcile(ctx context.Context, wait bool) {
	m.mu.Lock()
	m.passes++
	m.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, m.cfg.CheckTimeout)
	jobs, err := m.bus.Jobs().List(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("job check failed", "err", err)
		}
		return
	}
	var started sync.WaitGroup
	for _, rec := range jobs {
		if !m.needsCheck(rec) || !m.beginCheck(ctx, rec.ID, wait) {
			continue
		}
		select {
		case m.slots <- struct{}{}:
		case <-ctx.Done():
			m.endCheck(rec.ID)
			return
		}
		started.Add(1)
		m.checking.Go(func() {
			defer started.Done()
			defer func() { <-m.slots }()
			defer m.endCheck(rec.ID)
			cctx, cancel := context.WithTimeout(ctx, m.cfg.CheckTimeout)
			defer cancel()
			if err := m.reconcileJob(cctx, rec); err != nil && ctx.Err() == nil {
				m.log.Warn("job check failed", "job", rec.ID, "err", err)
			}
		})
	}
	if wait {
		started.Wait()
	}
}

// beginCheck claims the check of job and reports whether it may run: not
// while another check of job runs, for which it waits when wait is set.
// Call endCheck when the check is over.
func (m *Stage) beginCheck(ctx context.Context, job string, wait bool) bool {
	for {
		m.mu.Lock()
		running, busy := m.inCheck[job]
		if !busy {
			m.inCheck[job] = make(chan struct{})
			m.mu.Unlock()
			return true
		}
		m.mu.Unlock()
		if !wait {
			return false
		}
		select {
		case <-running:
		case <-ctx.Done():
			return false
		}
	}
}

// endCheck releases the check of job that beginCheck claimed.
func (m *Stage) endCheck(job string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.inCheck[job])
	delete(m.inCheck, job)
}

// needsCheck reports whether rec's job has anything to check in this pass:
// a job being created, a running job due (see due), a finished one not yet
// cleaned up. A finished job's check state is forgotten, however it ended.
func (m *Stage) needsCheck(rec *schemas.JobRecord) bool {
	switch {
	case rec.State == schemas.Ongoing:
		return m.due(rec.ID)
	case rec.State.Final():
		m.forgetCheck(rec.ID)
		m.forgetProgress(rec.ID)
		return rec.CleanedAt.IsZero()
	}
	return true
}

// reconcileJob checks one job (see Reconcile) that needsCheck chose.
func (m *Stage) reconcileJob(ctx context.Context, rec *schemas.JobRecord) error {
	switch rec.State {
	case schemas.Created:
		m.mu.Lock()
		busy := m.submitting[rec.ID]
		m.mu.Unlock()
		// Another replica may be creating it: a creation is interrupted
		// once it outlives the time limit of the request that made it.
		if !busy && m.clock.Since(rec.CreatedAt) > m.cfg.RequestTimeout {
			_, err := m.emit(ctx, &schemas.JobEvent{Job: rec.ID, Type: schemas.EventError, State: schemas.Error,
				Reason: "interrupted while its workload was being queued"})
			return err
		}
		return nil
	case schemas.Ongoing:
		if rec.StopRequested && rec.Spec.Mode == schemas.Batch {
			// Items a failed worker returned after the stop are dropped too.
			if _, err := m.bus.Queues().DropQueued(ctx, rec.ID); err != nil {
				return err
			}
		}
		ws, err := m.bus.JobWork(ctx, rec)
		if err != nil {
			return err
		}
		// Results for items the job never had count for nothing in ws:
		// failing to set them aside delays their letters, not the job.
		var setAside error
		if ws.NeverQueued > 0 {
			setAside = m.setAsideNeverQueued(ctx, rec)
		}
		ev := finished(rec, ws)
		if ev == nil {
			ev = m.breach(ctx, rec, ws)
		}
		if ev == nil {
			m.checked(rec, ws)
			return setAside
		}
		m.forgetCheck(rec.ID)
		ev.Job = rec.ID
		ctx, end := jobSpan(ctx, rec, "finish job", attribute.String("pace.job.state", string(ev.State)),
			attribute.Int("pace.job.results", ws.Results), attribute.Int("pace.job.dead", ws.Dead))
		defer func() { end(err) }()
		_, err = m.emit(ctx, ev)
		if err == nil {
			m.log.Info("job finished", "job", rec.ID, "state", ev.State, "results", ws.Results, "dead", ws.Dead)
			m.sweepSoon()
			if ev.State == schemas.Completed && rec.Total <= learnLimit {
				m.learn(ctx, rec)
			}
		}
		return errors.Join(setAside, err)
	}
	if !m.clock.Now().Before(rec.FinishedAt.Add(rec.Spec.ResourcesLifetime.D())) {
		return m.release(ctx, rec)
	}
	return nil
}

// release tears a finished job down once its resources_lifetime is over:
// items still queued were published after it ended and go to its dead
// letters, not unseen with a purge; so do results for items it never had;
// then its work consumer goes.
func (m *Stage) release(ctx context.Context, rec *schemas.JobRecord) (err error) {
	ctx, end := jobSpan(ctx, rec, "release job")
	defer func() { end(err) }()
	if err := m.setAsideNeverQueued(ctx, rec); err != nil {
		return err
	}
	if err := m.refuseStrays(ctx, rec); err != nil {
		return err
	}
	if err := m.bus.Queues().DeleteWorkConsumer(ctx, rec.ID); err != nil {
		return err
	}
	_, err = m.emit(ctx, &schemas.JobEvent{Job: rec.ID, Type: schemas.EventCleaned, State: rec.State,
		Reason: "resources released"})
	return err
}

// jobSpan starts a span of the job's trace (the one its creation began),
// when tracing is on; end ends it, marking it failed with a non-nil error.
func jobSpan(ctx context.Context, rec *schemas.JobRecord, name string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	if !tracing.Enabled() {
		return ctx, func(error) {}
	}
	if sc, err := tracing.Parse(rec.Trace); err == nil {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := tracing.Tracer().Start(ctx, name, trace.WithAttributes(append(attrs, attribute.String("pace.job", rec.ID))...))
	return ctx, func(err error) {
		if err != nil {
			tracing.Fail(span, err)
		}
		span.End()
	}
}

// finished returns the event that ends an ongoing job, or nil while it runs.
func finished(rec *schemas.JobRecord, ws bus.WorkState) *schemas.JobEvent {
	switch {
	case rec.StopRequested && ws.InFlight == 0 && ws.Pending == 0:
		return &schemas.JobEvent{Type: schemas.EventStopped, State: schemas.Stopped,
			Reason: fmt.Sprintf("stopped: %d results, %d dead letters", ws.Results, ws.Dead)}
	case rec.StopRequested || rec.Spec.Mode != schemas.Batch:
		return nil
	case ws.Results+ws.Dead < rec.Total:
		return nil
	case ws.Dead > 0 && ws.Pending+ws.InFlight > 0:
		return nil // a redriven item is queued or running: it may yet succeed
	case ws.Dead > 0:
		return &schemas.JobEvent{Type: schemas.EventFailed, State: schemas.Failed,
			Reason: fmt.Sprintf("%d of %d items dead-lettered", ws.Dead, rec.Total)}
	}
	return &schemas.JobEvent{Type: schemas.EventCompleted, State: schemas.Completed,
		Reason: fmt.Sprintf("all %d items have a result", rec.Total)}
}
