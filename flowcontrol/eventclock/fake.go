package eventclock

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a discrete-event clock. It is safe for concurrent use, but events
// run on the goroutine that calls Run or Step, one at a time.
type Fake struct {
	mu     sync.Mutex // guards the fields below
	now    time.Time
	seq    uint64
	events eventHeap
}

var _ Interface = (*Fake)(nil)

// NewFake returns a Fake reading t0.
func NewFake(t0 time.Time) *Fake { return &Fake{now: t0} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// EventAfterDuration schedules fn at Now()+d. A non-positive d schedules it
// at the current time; it still runs only from Run or Step.
func (f *Fake) EventAfterDuration(fn func(now time.Time), d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	heap.Push(&f.events, event{at: f.now.Add(max(d, 0)), seq: f.seq, fn: fn})
}

// Run fires every event due at or before limit in time order (ties in
// scheduling order), including events those events schedule, and leaves the
// clock at the last event's time. It returns the number of events fired.
func (f *Fake) Run(limit time.Time) int {
	n := 0
	for {
		f.mu.Lock()
		if len(f.events) == 0 || f.events[0].at.After(limit) {
			f.mu.Unlock()
			return n
		}
		ev := heap.Pop(&f.events).(event)
		if ev.at.After(f.now) {
			f.now = ev.at
		}
		now := f.now
		f.mu.Unlock()
		ev.fn(now)
		n++
	}
}

// Step fires the events due within d and then sets the clock to Now()+d.
func (f *Fake) Step(d time.Duration) {
	end := f.Now().Add(d)
	f.Run(end)
	f.mu.Lock()
	if end.After(f.now) {
		f.now = end
	}
	f.mu.Unlock()
}

// Pending returns the number of scheduled events.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

type event struct {
	at  time.Time
	seq uint64
	fn  func(time.Time)
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	ev := old[len(old)-1]
	*h = old[:len(old)-1]
	return ev
}
