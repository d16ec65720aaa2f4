package queueset

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/work"
)

var oneSeat = work.Estimate{InitialSeats: 1}

func mustQueueSet(t *testing.T, cfg Config, limit int, clk eventclock.Interface, opts ...Option) *QueueSet {
	t.Helper()
	qs, err := New(clk, cfg, limit, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return qs
}

func mustStart(t *testing.T, qs *QueueSet, est work.Estimate, hash uint64, label string) *Request {
	t.Helper()
	r, reason := qs.Start(est, hash, "fs", label, Callbacks{})
	if r == nil {
		t.Fatalf("Start(%s) rejected: %s", label, reason)
	}
	return r
}

func checkInvariants(t *testing.T, qs *QueueSet) {
	t.Helper()
	if err := qs.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Queues: 8, HandSize: 9}, "handSize 9 is greater than deckSize 8"},
		{Config{Queues: 512, HandSize: 8}, "required entropy bits of deckSize 512 and handSize 8 is greater than 60"},
		{Config{Queues: 8, HandSize: 2, QueueLengthLimit: -1}, "queue length limit -1 is negative"},
	} {
		_, err := New(eventclock.NewFake(t0), tc.cfg, 1)
		if err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) error = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(eventclock.NewFake(t0), Config{}, 1, WithServiceTimeGuess(0)); err == nil {
		t.Error("WithServiceTimeGuess(0) accepted")
	}
}

// TestContextCancel follows upstream's TestContextCancel: a queued request whose
// context ends is withdrawn as time-out, after exactly the time it waited.
func TestContextCancel(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Name: "cancel", Queues: 11, QueueLengthLimit: 11, HandSize: 1}, 1, clk)
	r1 := mustStart(t, qs, oneSeat, 1, "r1")
	r2 := mustStart(t, qs, oneSeat, 2, "r2")
	ctx, cancel := context.WithCancel(context.Background())
	clk.EventAfterDuration(func(time.Time) { cancel() }, time.Second)
	done := make(chan bool)
	go func() { done <- r2.Wait(ctx) }()
	clk.Step(2 * time.Second)
	if executed := <-done; executed {
		t.Fatal("r2 executed, want withdrawn")
	}
	if d := qs.Dump(); d.TimedOut != 1 || d.Rejected != 1 || d.Waiting != 0 {
		t.Errorf("dump = timedOut %d rejected %d waiting %d, want 1 1 0", d.TimedOut, d.Rejected, d.Waiting)
	}
	if r2.Cancel() {
		t.Error("second Cancel succeeded")
	}
	if !r1.Wait(ctx) {
		t.Error("r1 Wait = false, want true (it was dispatched at once)")
	}
	if idle := r1.Finish(nil); !idle {
		t.Error("finishing r1 left the queue set busy")
	}
	checkInvariants(t, qs)
}

// TestWaitDispatched covers a blocked Wait woken by a dispatch.
func TestWaitDispatched(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Queues: 4, QueueLengthLimit: 4, HandSize: 2}, 1, clk)
	r1 := mustStart(t, qs, oneSeat, 1, "r1")
	r2 := mustStart(t, qs, oneSeat, 2, "r2")
	done := make(chan bool)
	go func() { done <- r2.Wait(context.Background()) }()
	r1.Finish(nil)
	if !<-done {
		t.Fatal("r2 not dispatched")
	}
	if idle := r2.Finish(nil); !idle {
		t.Error("not idle after both finished")
	}
}

func TestFinishPanicReleases(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Queues: 0}, 1, clk)
	r := mustStart(t, qs, oneSeat, 0, "p")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic not propagated")
			}
		}()
		r.Finish(func() { panic("boom") })
	}()
	if d := qs.Dump(); d.Executing != 0 || d.SeatsInUse != 0 {
		t.Errorf("after panic: executing %d, seats %d; want 0, 0", d.Executing, d.SeatsInUse)
	}
}

// TestFindDispatchQueue replays upstream's TestFindDispatchQueueLocked cases,
// including head-of-line blocking.
func TestFindDispatchQueue(t *testing.T) {
	type q struct {
		nextR float64 // seat-seconds
		width int
	}
	for _, tc := range []struct {
		name      string
		limit     int
		inUse     int
		queues    []q
		attempts  []int // expected queue index per attempt, −1 for none
		robin     []int // expected robinIndex after each attempt
		freeAfter int   // attempt after which seats in use drop by one (0: never)
	}{
		{"lowest finish wins", 1, 0, []q{{200, 1}, {100, 1}}, []int{1}, []int{1}, 0},
		{"no seats", 1, 1, []q{{200, 1}}, []int{-1}, []int{0}, 0},
		{"fits exactly", 50, 25, []q{{200, 50}, {100, 25}}, []int{1}, []int{1}, 0},
		{"head of line blocks", 50, 26, []q{{200, 10}, {100, 25}}, []int{-1, -1, -1}, []int{1, 1, 1}, 0},
		{"unblocked", 50, 26, []q{{200, 10}, {100, 25}}, []int{-1, -1, 1}, []int{1, 1, 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qs := mustQueueSet(t, Config{Queues: len(tc.queues), QueueLengthLimit: 10, HandSize: 1}, tc.limit, eventclock.NewFake(t0))
			qs.totSeatsInUse = tc.inUse
			qs.robinIndex = len(tc.queues) - 1
			for i, spec := range tc.queues {
				r := &Request{qs: qs, est: work.Complete(work.Estimate{InitialSeats: spec.width}, DefaultServiceTimeGuess)}
				qs.enqueueLocked(qs.queues[i], r)
				qs.queues[i].nextDispatchR = work.SeatSeconds(spec.nextR * 1e8)
			}
			for a, want := range tc.attempts {
				got := -1
				if q := qs.findDispatchQueueLocked(); q != nil {
					got = q.index
				}
				if got != want || qs.robinIndex != tc.robin[a] {
					t.Errorf("attempt %d: queue %d robin %d, want queue %d robin %d", a, got, qs.robinIndex, want, tc.robin[a])
				}
				if tc.freeAfter == a+1 {
					qs.totSeatsInUse--
				}
			}
		})
	}
}

// TestFinishServiceTimeCorrection follows upstream's TestFinishRequestLocked:
// finishing corrects nextDispatchR by InitialSeats×(S−G) and releases final
// seats only after the additional latency.
func TestFinishServiceTimeCorrection(t *testing.T) {
	for _, est := range []work.Estimate{
		{InitialSeats: 1, FinalSeats: 10, AdditionalLatency: time.Minute},
		{InitialSeats: 10},
	} {
		clk := eventclock.NewFake(t0)
		qs := mustQueueSet(t, Config{Queues: 1, QueueLengthLimit: 10, HandSize: 1}, 100, clk, WithServiceTimeGuess(time.Second))
		r := mustStart(t, qs, est, 0, "r")
		other := mustStart(t, qs, work.Estimate{InitialSeats: 12}, 0, "other")
		q := qs.queues[0]
		before := q.nextDispatchR
		clk.Step(3 * time.Second) // S = 3 s, G = 1 s
		r.Finish(nil)
		wantR := before + work.SeatsTimesDuration(float64(est.InitialSeats), 2*time.Second)
		if q.nextDispatchR != wantR {
			t.Errorf("%+v: nextDispatchR = %v, want %v", est, q.nextDispatchR, wantR)
		}
		clk.Step(est.AdditionalLatency)
		d := qs.Dump()
		if d.Executing != 1 || d.SeatsInUse != 12 || d.Queues[0].SeatsInUse != 12 || d.Queues[0].Executing[0].Label != "other" {
			t.Errorf("%+v: dump after release = %+v", est, d)
		}
		other.Finish(nil)
		checkInvariants(t, qs)
	}
}

func TestLingeringSeatsReleasedByClock(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Queues: 2, QueueLengthLimit: 5, HandSize: 1}, 2, clk)
	est := work.Estimate{InitialSeats: 1, FinalSeats: 2, AdditionalLatency: 100 * time.Millisecond}
	r := mustStart(t, qs, est, 0, "writer")
	r2 := mustStart(t, qs, oneSeat, 1, "reader") // needs a seat, writer holds 2
	if r2.state != stateWaiting {
		t.Fatalf("reader state = %d, want waiting", r2.state)
	}
	if idle := r.Finish(nil); idle {
		t.Error("idle with a request waiting")
	}
	clk.Step(99 * time.Millisecond)
	if r2.state != stateWaiting {
		t.Fatal("reader dispatched while final seats linger")
	}
	clk.Step(time.Millisecond)
	if r2.state != stateExecuting {
		t.Fatal("reader not dispatched when final seats were released")
	}
	r2.Finish(nil)
	checkInvariants(t, qs)
}

func TestRequestSeatsAndWork(t *testing.T) {
	for _, tc := range []struct{ init, final, want int }{{3, 3, 3}, {1, 3, 3}, {3, 1, 3}} {
		if got := (work.Estimate{InitialSeats: tc.init, FinalSeats: tc.final}).MaxSeats(); got != tc.want {
			t.Errorf("MaxSeats(%d,%d) = %d, want %d", tc.init, tc.final, got, tc.want)
		}
	}
	c := work.Complete(work.Estimate{InitialSeats: 3, FinalSeats: 50, AdditionalLatency: 70 * time.Second}, 2*time.Second)
	if got, want := c.TotalWork(), work.SeatSeconds(3506e8); got != want {
		t.Errorf("TotalWork = %v, want %v", got, want)
	}
}

func TestQueueFullAndReject(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Queues: 1, QueueLengthLimit: 1, HandSize: 1}, 1, clk)
	mustStart(t, qs, oneSeat, 0, "running")
	mustStart(t, qs, oneSeat, 0, "queued")
	if r, reason := qs.Start(oneSeat, 0, "fs", "third", Callbacks{}); r != nil || reason != QueueFull {
		t.Errorf("third = %v, %q; want nil, %q", r, reason, QueueFull)
	}
	// With seats free a full queue still takes requests (reference §1.4).
	qs2 := mustQueueSet(t, Config{Queues: 1, QueueLengthLimit: 1, HandSize: 1}, 3, clk)
	mustStart(t, qs2, work.Estimate{InitialSeats: 2}, 0, "wide")
	mustStart(t, qs2, work.Estimate{InitialSeats: 2}, 0, "blocked")
	if r, _ := qs2.Start(oneSeat, 0, "fs", "behind", Callbacks{}); r == nil {
		t.Error("request rejected although a seat is free")
	}
	checkInvariants(t, qs2)
}

// TestSeatsWaitingAfterFinalClamp is the reproduction of reference §1.12 item 1:
// upstream leaves SeatsWaiting (and current_inqueue_seats) at 1 for good;
// Pace returns to 0, and its queue events carry 3 seats in and 3 out.
func TestSeatsWaitingAfterFinalClamp(t *testing.T) {
	clk := eventclock.NewFake(t0)
	var eventSeats []int
	qs := mustQueueSet(t, Config{Queues: 4, QueueLengthLimit: 4, HandSize: 1}, 2, clk,
		WithObserver(func(ev Event) { eventSeats = append(eventSeats, ev.Seats) }))
	r := mustStart(t, qs, work.Estimate{InitialSeats: 1, FinalSeats: 3, AdditionalLatency: 100 * time.Millisecond}, 0, "w")
	if got := r.Estimate(); got.FinalSeats != 2 || got.AdditionalLatency != 150*time.Millisecond {
		t.Errorf("clamped estimate = %+v, want 2 final seats for 150ms (same final work)", got)
	}
	r.Finish(nil)
	clk.Step(time.Second)
	if d := qs.Dump(); d.SeatsWaiting != 0 || d.SeatsInUse != 0 {
		t.Errorf("idle dump: seats waiting %d, in use %d; want 0, 0", d.SeatsWaiting, d.SeatsInUse)
	}
	if got := qs.SeatDemand().Results().Max; got != 3 {
		t.Errorf("seat demand max = %v, want 3 (the request's pre-clamp width while waiting)", got)
	}
	if want := []int{3, 3}; !cmp.Equal(eventSeats, want) {
		t.Errorf("seats of the enqueued and dispatched events = %v, want %v", eventSeats, want)
	}
	checkInvariants(t, qs)
}

// TestQueueRemovalWaitsForLingeringSeats covers upstream PR #140885: after the
// queue count shrinks, a queue holding only lingering seats must survive until
// they are released, and then be removed once.
func TestQueueRemovalWaitsForLingeringSeats(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Queues: 2, QueueLengthLimit: 4, HandSize: 1}, 10, clk)
	// hash 1 with deck 2 and hand 1 lands in queue 1
	lingering := mustStart(t, qs, work.Estimate{InitialSeats: 1, FinalSeats: 1, AdditionalLatency: time.Second}, 1, "lingering")
	quick := mustStart(t, qs, oneSeat, 1, "quick")
	if err := qs.Reconfigure(Config{Queues: 1, QueueLengthLimit: 4, HandSize: 1}, 10); err != nil {
		t.Fatal(err)
	}
	lingering.Finish(nil)
	quick.Finish(nil) // upstream removes queue 1 here although seats linger in it
	if got := len(qs.Dump().Queues); got != 2 {
		t.Fatalf("queues = %d after quick finish, want 2 (queue 1 kept while seats linger)", got)
	}
	clk.Step(time.Second)
	d := qs.Dump()
	if len(d.Queues) != 1 || d.SeatsInUse != 0 {
		t.Fatalf("after release: %d queues, %d seats; want 1, 0", len(d.Queues), d.SeatsInUse)
	}
	checkInvariants(t, qs)
}

// TestZeroLimitAdmitsNothing covers upstream #134196: a Reject level with C = 0
// (a "jail") must reject everything, not run one request at a time.
func TestZeroLimitAdmitsNothing(t *testing.T) {
	clk := eventclock.NewFake(t0)
	jail := mustQueueSet(t, Config{Name: "jail", Queues: 0}, 0, clk)
	if r, reason := jail.Start(oneSeat, 0, "fs", "x", Callbacks{}); r != nil || reason != ConcurrencyLimit {
		t.Errorf("jail admitted: %v %q", r, reason)
	}
	queued := mustQueueSet(t, Config{Queues: 2, QueueLengthLimit: 1, HandSize: 1}, 0, clk)
	r := mustStart(t, queued, oneSeat, 0, "waits")
	if r.state != stateWaiting {
		t.Error("queued level with C=0 dispatched a request")
	}
	queued.SetConcurrencyLimit(1)
	if r.state != stateExecuting {
		t.Error("raising C did not dispatch the waiting request")
	}
	// A too-wide request still runs alone when C > 0.
	wide := mustQueueSet(t, Config{Queues: 0}, 2, clk)
	if r, _ := wide.Start(work.Estimate{InitialSeats: 5}, 0, "fs", "wide", Callbacks{}); r == nil {
		t.Error("too-wide request rejected on an idle level")
	}
}

func TestReconfigure(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Queues: 2, QueueLengthLimit: 4, HandSize: 1}, 1, clk)
	running := mustStart(t, qs, oneSeat, 0, "running")
	waiting := mustStart(t, qs, oneSeat, 1, "waiting")
	if err := qs.Reconfigure(Config{Queues: 8, QueueLengthLimit: 4, HandSize: 9}, 1); err == nil {
		t.Error("bad hand size accepted")
	}
	if err := qs.Reconfigure(Config{Queues: 4, QueueLengthLimit: 4, HandSize: 2}, 2); err != nil {
		t.Fatal(err)
	}
	d := qs.Dump()
	if len(d.Queues) != 4 || waiting.state != stateExecuting || running.state != stateExecuting {
		t.Fatalf("after growing: %d queues, waiting state %d", len(d.Queues), waiting.state)
	}
	// Reject mode keeps the leftover queues' rules and drains them.
	if err := qs.Reconfigure(Config{Queues: 0}, 2); err != nil {
		t.Fatal(err)
	}
	if qs.cfg.QueueLengthLimit != 4 || qs.cfg.HandSize != 2 {
		t.Errorf("Reject mode changed QLL/hand to %d/%d", qs.cfg.QueueLengthLimit, qs.cfg.HandSize)
	}
	running.Finish(nil)
	waiting.Finish(nil)
	if d := qs.Dump(); len(d.Queues) != 2 {
		t.Errorf("after draining: %d queues, want 2 (the ones never used stay until used and emptied)", len(d.Queues))
	}
	checkInvariants(t, qs)
}

func TestDumpShowsRequests(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Name: "d", Queues: 1, QueueLengthLimit: 4, HandSize: 1}, 1, clk)
	mustStart(t, qs, oneSeat, 0, "a")
	mustStart(t, qs, oneSeat, 0, "b")
	d := qs.Dump()
	got := []string{d.Queues[0].Executing[0].Label, d.Queues[0].Waiting[0].Label}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("dump labels (-want +got):\n%s", diff)
	}
}

// TestQueueEvents: the observer sees each request join its queue, with the
// length of that queue right after joining (kube's
// request_queue_length_after_enqueue, not the level's total), and leave it
// when dispatched or withdrawn. With one seat and two queues (hand size 1):
//
//	a joins queue X (1) and is dispatched at once
//	b joins X behind nobody waiting (1)
//	c joins Y (1) while 2 wait in the level
//	d (2 seats) joins X behind b (2) while 3 wait in the level
//	d is withdrawn; a finishes and one of b and c is dispatched
//
// A level without queues reports nothing.
func TestQueueEvents(t *testing.T) {
	var got []string
	observe := func(ev Event) {
		kind := map[EventKind]string{Enqueued: "enqueued", Dispatched: "dispatched", Withdrawn: "withdrawn"}[ev.Kind]
		got = append(got, fmt.Sprintf("%s %s/%s seats=%d len=%d", kind, ev.PriorityLevel, ev.FlowSchema, ev.Seats, ev.QueueLength))
	}
	qs := mustQueueSet(t, Config{Name: "pl", Queues: 2, HandSize: 1, QueueLengthLimit: 5}, 1, eventclock.NewFake(t0), WithObserver(observe))
	x, y := uint64(0), uint64(1)
	start := func(est work.Estimate, hash uint64, label string) *Request {
		t.Helper()
		r, reason := qs.Start(est, hash, label, label, Callbacks{})
		if r == nil {
			t.Fatalf("Start(%s) rejected: %s", label, reason)
		}
		return r
	}
	a := start(oneSeat, x, "a")
	b := start(oneSeat, x, "b")
	c := start(oneSeat, y, "c")
	d := start(work.Estimate{InitialSeats: 2}, x, "d")
	if b.queue == c.queue || b.queue != d.queue {
		t.Fatalf("scenario needs b and d in one queue, c in the other: queues %d, %d, %d", b.queue.index, c.queue.index, d.queue.index)
	}
	if w := qs.Dump().Waiting; w != 3 {
		t.Errorf("level waiting = %d, want 3", w)
	}
	if !d.Cancel() {
		t.Fatal("Cancel of waiting d failed")
	}
	a.Finish(nil)
	next := "b"
	if b.state == stateWaiting {
		next = "c"
	}
	want := []string{
		"enqueued pl/a seats=1 len=1", "dispatched pl/a seats=1 len=0",
		"enqueued pl/b seats=1 len=1", "enqueued pl/c seats=1 len=1", "enqueued pl/d seats=2 len=2",
		"withdrawn pl/d seats=2 len=0", "dispatched pl/" + next + " seats=1 len=0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkInvariants(t, qs)

	got = nil
	queueless := mustQueueSet(t, Config{Name: "exempt", Queues: Exempt}, 1, eventclock.NewFake(t0), WithObserver(observe))
	mustStart(t, queueless, oneSeat, x, "e").Finish(nil)
	if len(got) != 0 {
		t.Errorf("a level without queues reported %v", got)
	}
}
