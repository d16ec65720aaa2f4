package manager

import (
	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// maxIdlePasses is the most job-check passes a running job whose work has
// not changed waits between two checks: with the default 1 s interval an
// idle job is looked at every 30 s, and a thousand of them cost the bus
// 100 requests a second instead of 3,000.
const maxIdlePasses = 30

// jobCheck is when a running job is checked next, by job-check pass.
type jobCheck struct {
	skip, every int           // passes left to skip; passes between checks
	last        bus.WorkState // what the last check found
}

// due reports whether running job is checked in this pass: at once after a
// change (its own, or one it was woken for), then, while nothing changes,
// every 2, 4, … up to maxIdlePasses passes.
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

// checked notes what a check of job found and when to check it next: at
// the next pass while it holds results it never queued.
func (m *Manager) checked(job string, ws bus.WorkState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.checks[job]
	switch {
	case !ok || ws != c.last || ws.NeverQueued > 0: // results to set aside once the ledger has caught up
		c.every = 1
	default:
		c.every = min(2*c.every, maxIdlePasses)
	}
	c.skip, c.last = c.every-1, ws
	m.checks[job] = c
}

// moved wakes a job whose progress differs from what its last check found
// (a heartbeat sample of an idle job does not).
func (m *Manager) moved(p *schemas.Progress) {
	m.mu.Lock()
	c, ok := m.checks[p.Job]
	m.mu.Unlock()
	if ok && p.Done == c.last.Results && p.Dead == c.last.Dead && p.QueueLength == c.last.Pending &&
		p.InFlight == c.last.InFlight {
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
