package manager

import (
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/heartbeat"
	"github.com/pace-platform/pace/schemas"
)

// maxQuietPasses is the most job-check passes a running job waits between
// two checks once a check found nothing new in it: time alone changes
// nothing a check finds, only its progress moving (its workers included) or
// an event, and either has it checked at the next pass; so it is looked at
// every 5 minutes (at the default 1 s interval), on a phase of its own
// (heartbeat.Next), and a thousand idle jobs cost the bus a few requests a
// second instead of 3,000, the same in every minute. The one thing time
// alone does is run out a stall clock (items wait for workers Pace runs,
// the stall rule is on): such a job is checked again when it would.
const maxQuietPasses = 300

// jobCheck is when a running job is checked next.
type jobCheck struct {
	skip      int           // passes left to skip
	stallEnds time.Time     // when its stall clock runs out, if it runs: checked then whatever skip says
	last      bus.WorkState // what the last check found
	workers   int           // the replicas of the record the last check read
}

// due reports whether running job is checked in this pass: at once after a
// change (its own, or one it was woken for), then, while nothing changes,
// every maxQuietPasses, and when its stall clock runs out.
func (m *Stage) due(job string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.checks[job]
	if !ok || c.skip == 0 || (!c.stallEnds.IsZero() && !m.clock.Now().Before(c.stallEnds)) {
		return true
	}
	c.skip--
	m.checks[job] = c
	return false
}

// checked notes what a check of rec found, ws, and when to check it next:
// at the next pass after a change or while it holds results it never
// queued; else on its quiet heartbeat, or when its stall clock runs out.
func (m *Stage) checked(rec *schemas.JobRecord, ws bus.WorkState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.checks[rec.ID]
	c.stallEnds = time.Time{}
	if !ok || ws != c.last || rec.Replicas != c.workers || ws.NeverQueued > 0 { // results to set aside once the ledger has caught up
		c.skip = 0
	} else {
		c.skip = heartbeat.Next(rec.ID, m.passes, maxQuietPasses) - 1
		if mark, seen := m.progress[rec.ID]; seen && stallClockRuns(rec, ws) {
			c.stallEnds = mark.since.Add(rec.Spec.Failure.Stall.D())
		}
	}
	c.last, c.workers = ws, rec.Replicas
	m.checks[rec.ID] = c
}

// stallClockRuns reports whether time alone may fail rec by the stall rule
// of its failure policy (see breach): items wait for workers Pace runs.
func stallClockRuns(rec *schemas.JobRecord, ws bus.WorkState) bool {
	return rec.Spec.Failure.On(schemas.RuleStall) && rec.Spec.Actuated() && !rec.StopRequested &&
		ws.Pending+ws.InFlight > 0 && rec.Replicas > 0
}

// moved wakes a job whose progress differs from what its last check found,
// its workers included, or holds results to set aside (a heartbeat sample
// of an idle job does neither).
func (m *Stage) moved(p *schemas.Progress) {
	m.mu.Lock()
	c, ok := m.checks[p.Job]
	m.mu.Unlock()
	if ok && p.Done == c.last.Results && p.Dead == c.last.Dead && p.QueueLength == c.last.Pending &&
		p.InFlight == c.last.InFlight && p.Replicas == c.workers && p.Unqueued == 0 {
		return
	}
	m.wake(p.Job)
}

// wake has job checked at the next pass: its progress moved, or an event
// changed it.
func (m *Stage) wake(job string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.checks[job]; ok {
		c.skip = 0
		m.checks[job] = c
	}
}

// forgetCheck drops a job that is no longer running.
func (m *Stage) forgetCheck(job string) {
	m.mu.Lock()
	delete(m.checks, job)
	m.mu.Unlock()
}
