package manager

import (
	"context"
	"net/http"

	"github.com/pace-platform/pace/bus"
)

// retryAfterFull is the Retry-After, in seconds, of a submission refused
// for want of room: the time for some queued work to be done.
const retryAfterFull = 60

// admit refuses, before anything is stored, a submission larger than
// Config.MaxJobItems (413), that would take its owner past
// Config.MaxUserQueued items queued or running in unfinished jobs, or past
// Config.MaxUserJobs unfinished jobs (429).
func (m *Stage) admit(ctx context.Context, sub *submission) error {
	n := len(sub.items)
	if n > m.cfg.MaxJobItems {
		return apiError(http.StatusRequestEntityTooLarge,
			"the workload has %d items: at most %d per job (--max-job-items)", n, m.cfg.MaxJobItems)
	}
	jobs, queued, err := m.unfinishedOf(ctx, sub.spec.Owner, n > 0)
	if err != nil {
		return err
	}
	if jobs >= m.cfg.MaxUserJobs {
		e := apiError(http.StatusTooManyRequests, "%s has %d unfinished jobs: the quota is %d (--max-user-jobs)",
			sub.spec.Owner, jobs, m.cfg.MaxUserJobs)
		e.RetryAfter = retryAfterFull
		return e
	}
	if n > 0 && queued+n > m.cfg.MaxUserQueued {
		e := apiError(http.StatusTooManyRequests,
			"%s has %d items queued or running in unfinished jobs: %d more would pass the quota of %d (--max-user-queued)",
			sub.spec.Owner, queued, n, m.cfg.MaxUserQueued)
		e.RetryAfter = retryAfterFull
		return e
	}
	return nil
}

// unfinishedOf counts the unfinished jobs of owner and, with items, the
// items waiting or running in them: one look at the subjects of the work
// stream holding owner's jobs.
func (m *Stage) unfinishedOf(ctx context.Context, owner string, items bool) (jobs, queued int, err error) {
	recs, err := m.bus.Jobs().List(ctx)
	if err != nil {
		return 0, 0, err
	}
	var counts map[string]int
	if items {
		if counts, err = m.bus.Queues().QueuedItems(ctx, owner); err != nil {
			return 0, 0, err
		}
	}
	for _, rec := range recs {
		if rec.Spec.Owner == owner && !rec.State.Final() {
			jobs++
			queued += counts[rec.ID]
		}
	}
	return jobs, queued, nil
}

// undo removes a job whose items could not all be stored (or whose user's
// work stream could not be made), so that a submission stores its job and
// all its items or nothing, and returns the refusal: 507 when the bus is
// full, 503 otherwise, both with Retry-After.
// Should the removal itself fail, the job is left in the error state.
func (m *Stage) undo(ctx context.Context, job string, cause error) error {
	ctx = context.WithoutCancel(ctx)
	if err := m.bus.Queues().PurgeJob(ctx, job); err != nil {
		m.log.Error("job whose items could not be stored not removed", "job", job, "err", err)
		return m.fail(ctx, job, cause)
	}
	m.log.Warn("submission refused: its items could not be stored, nothing was kept", "job", job, "err", cause)
	code, why := http.StatusServiceUnavailable, "the bus could not store"
	if bus.StoreFull(cause) {
		code, why = http.StatusInsufficientStorage, "the bus has no room for"
	}
	e := apiError(code, "%s the job's items, nothing was kept; try again later (%v)", why, cause)
	e.RetryAfter = retryAfterFull
	return e
}
