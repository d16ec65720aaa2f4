// Package retryafter computes the Retry-After hint sent with rejected
// requests, per priority level (reference §1.7).
//
// Drops are counted per Unix second. When the first drop of a new second is
// recorded, the drops of the retryAfter seconds before it are summed: at
// least 3×retryAfter doubles retryAfter (capped at 32 s), if the last increase
// is at least retryAfter seconds old; fewer than retryAfter lowers it by one
// (not below 1 s). This is kube-apiserver's droppedRequestsTracker rule.
package retryafter

import (
	"sync"
	"time"
)

// Max is the largest hint, in seconds.
const Max = 32

// Tracker keeps one Retry-After state per priority level. It is safe for
// concurrent use.
type Tracker struct {
	now func() time.Time

	mu     sync.Mutex // guards levels
	levels map[string]*level
}

type second struct {
	unix  int64
	drops int64
}

type level struct {
	history      []second // completed seconds, oldest first
	current      second
	retryAfter   int64
	lastIncrease int64
}

// New returns a Tracker reading time from now (e.g. clock.Now).
func New(now func() time.Time) *Tracker {
	return &Tracker{now: now, levels: map[string]*level{}}
}

// RecordDropped notes one rejected request of the priority level.
func (t *Tracker) RecordDropped(priorityLevel string) {
	unix := t.now().Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.levels[priorityLevel]
	if l == nil {
		l = &level{retryAfter: 1}
		t.levels[priorityLevel] = l
	}
	if l.current.unix == unix {
		l.current.drops++
		return
	}
	l.pushHistory(l.current)
	l.current = second{unix: unix, drops: 1}
	l.update(unix)
}

// RetryAfter returns the current hint for the priority level.
func (t *Tracker) RetryAfter(priorityLevel string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.levels[priorityLevel]; l != nil {
		return time.Duration(l.retryAfter) * time.Second
	}
	return time.Second
}

// pushHistory appends a finished second and forgets seconds older than
// min(2×retryAfter, Max) before it.
func (l *level) pushHistory(s second) {
	l.history = append(l.history, s)
	keep := min(2*l.retryAfter, Max)
	start := 0
	for start < len(l.history) && s.unix-l.history[start].unix > keep {
		start++
	}
	l.history = l.history[start:]
}

func (l *level) update(unix int64) {
	var drops int64
	for i := len(l.history) - 1; i >= 0 && unix-l.history[i].unix <= l.retryAfter; i-- {
		if l.history[i].unix < unix {
			drops += l.history[i].drops
		}
	}
	switch {
	case unix-l.lastIncrease >= l.retryAfter && drops >= 3*l.retryAfter:
		l.retryAfter = min(2*l.retryAfter, Max)
		l.lastIncrease = unix
	case drops < l.retryAfter && l.retryAfter > 1:
		l.retryAfter--
	}
}
