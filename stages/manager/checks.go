package manager

import (
	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/heartbeat"
	"github.com/pace-platform/pace/schemas"
)

// maxIdlePasses is the most job-check passes a running job whose work has
// not changed waits between two checks while its stall clock runs (items
// wait for workers Pace runs, the stall rule is on): every 2, 4, … up to 30
// passes, 30 s at the default 1 s interval. maxQuietPasses is the wait of
// any other, from its first check that finds nothing new: time alone
// changes nothing a check finds in it, only its progress moving (its
// workers included) or an event, and either has it checked at the next
// pass; so it is looked at every 5 minutes, on a phase of its own
// (heartbeat.Next), and a thousand idle jobs cost the bus a few requests a
// second instead of 3,000, the same in every minute.
const (
	maxIdlePasses  = 30
	maxQuietPasses = 300
)

// jobCheck is when a running job is checked next, by job-check pass.
type jobCheck struct {
	skip, every int           // passes left to skip; passes between checks
	last        bus.WorkState // what the last check found
	workers     int           // the replicas of the record the last check read
}

// due reports whether running job is checked in this pass: at once after a
// change (its own, or one it was woken for), then, while nothing changes,
// every 2, 4, … up to maxIdlePasses passes while its stall clock runs, else
// every maxQuietPasses.
func (m *Manager) due(job string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.checks[job]
	if ok && c.skip > 0 {
		c.skip--
		m.checks[job] = c
		return false
	}
	return true
}

// checked notes what a check of rec found, ws, and when to check it next:
// at the next pass after a change or while it holds results it never
// queued.
func (m *Manager) checked(rec *schemas.JobRecord, ws bus.WorkState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.checks[rec.ID]
	switch {
	case !ok || ws != c.last || rec.Replicas != c.workers || ws.NeverQueued > 0: // results to set aside once the ledger has caught up
		c.every = 1
	case stallClockRuns(rec, ws):
		c.every = min(2*c.every, maxIdlePasses)
	default:
		c.every = maxQuietPasses
	}
	c.skip, c.last, c.workers = c.every-1, ws, rec.Replicas
	if c.every == maxQuietPasses {
		c.skip = heartbeat.Next(rec.ID, m.passes, maxQuietPasses) - 1
	}
	m.checks[rec.ID] = c
}

// stallClockRuns reports whether time alone may fail rec by the stall rule
// of its failure policy (see breach): items wait for workers Pace runs.
func stallClockRuns(rec *schemas.JobRecord, ws bus.WorkState) bool {
	return rec.Spec.Failure.On(schemas.RuleStall) && rec.Spec.Actuated() && !rec.StopRequested &&
		ws.Pending+ws.InFlight > 0 && rec.Replicas > 0
}

// moved wakes a job whose progress differs from what its last check found,
// its workers included (a heartbeat sample of an idle job does not).
func (m *Manager) moved(p *schemas.Progress) {
	m.mu.Lock()
	c, ok := m.checks[p.Job]
	m.mu.Unlock()
	if ok && p.Done == c.last.Results && p.Dead == c.last.Dead && p.QueueLength == c.last.Pending &&
		p.InFlight == c.last.InFlight && p.Replicas == c.workers {
		return
	}
	m.wake(p.Job)
}

// wake has job checked at the next pass: its progress moved, or an event
// changed it.
func (m *Manager) wake(job string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.checks[job]; ok {
		c.skip, c.every = 0, 1
		m.checks[job] = c
	}
}

// forgetCheck drops a job that is no longer running.
func (m *Manager) forgetCheck(job string) {
	m.mu.Lock()
	delete(m.checks, job)
	m.mu.Unlock()
}
