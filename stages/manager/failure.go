package manager

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// progressMark is when a running job last made progress (a new result or
// dead letter), for the stall rule of its failure policy.
type progressMark struct {
	finished int // results + dead items
	since    time.Time
}

// breach returns the event that fails a running job by its failure policy
// (see schemas.FailurePolicy), or nil. ws is the job's work now. A job
// being stopped is left to drain.
func (m *Stage) breach(ctx context.Context, rec *schemas.JobRecord, ws bus.WorkState) *schemas.JobEvent {
	policy := rec.Spec.Failure
	if rec.StopRequested || !rec.Spec.Actuated() {
		m.forgetProgress(rec.ID)
		return nil
	}
	failed := func(reason string) *schemas.JobEvent {
		m.forgetProgress(rec.ID)
		return &schemas.JobEvent{Job: rec.ID, Type: schemas.EventFailed, State: schemas.Failed, Reason: reason}
	}
	if failures := ws.Redelivered + ws.Dead; policy.On(schemas.RuleBeforeFirstResult) && ws.Results == 0 &&
		failures >= policy.BeforeFirstResult {
		reason := fmt.Sprintf("failure policy before_first_result: %d items failed before the job's first result", failures)
		if last, err := m.bus.Jobs().LastFailure(ctx, rec.ID); err == nil && last != "" {
			reason += "; last error: " + last
		}
		return failed(reason)
	}
	if !policy.On(schemas.RuleStall) {
		return nil
	}
	now, finished := m.clock.Now(), ws.Results+ws.Dead
	m.mu.Lock()
	mark, seen := m.progress[rec.ID]
	if !seen || mark.finished != finished || ws.Pending+ws.InFlight == 0 || rec.Replicas == 0 {
		// Progress, nothing to do or nobody to do it: the clock restarts.
		m.progress[rec.ID] = progressMark{finished: finished, since: now}
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	if stalled := now.Sub(mark.since); stalled >= policy.Stall.D() {
		return failed(fmt.Sprintf("failure policy stall: no progress for %s with %d workers and %d items waiting",
			stalled.Round(time.Second), rec.Replicas, ws.Pending+ws.InFlight))
	}
	return nil
}

func (m *Stage) forgetProgress(job string) {
	m.mu.Lock()
	delete(m.progress, job)
	m.mu.Unlock()
}

// Fail fails a running job for reason (pace.control.fail): a runtime that
// sees the job's workers break asks it, by the job's failure policy. On a
// bus that authenticates only Pace's stages may ask; it answers the job's
// record as it is after.
func (m *Stage) Fail(ctx context.Context, data []byte) (*schemas.JobRecord, error) {
	var req bus.FailRequest
	errs, _ := decodeStrict(data, &req, nil)
	if len(errs) == 0 && !schemas.ValidToken(req.JobID) {
		errs = append(errs, field.Invalid(field.NewPath("job_id"), req.JobID, "must be 1-128 letters, digits, '-' or '_'"))
	}
	if len(errs) == 0 && strings.TrimSpace(req.Reason) == "" {
		errs = append(errs, field.Required(field.NewPath("reason"), "say why the job fails"))
	}
	if len(errs) > 0 {
		return nil, invalidAs("request", errs)
	}
	rec, err := m.bus.Jobs().Status(ctx, req.JobID)
	if err != nil {
		return nil, apiError(http.StatusNotFound, "job %s not found", req.JobID)
	}
	if rec.State.Final() {
		return rec, nil
	}
	m.forgetProgress(rec.ID)
	rec, err = m.emit(ctx, &schemas.JobEvent{Job: rec.ID, Type: schemas.EventFailed, State: schemas.Failed,
		Reason: req.Reason})
	if err == nil {
		m.log.Warn("job failed by its failure policy", "job", req.JobID, "reason", req.Reason)
		m.sweepSoon()
	}
	return rec, err
}
