package queueset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// ss converts seat-seconds to the fixed-point unit.
func ss(v float64) work.SeatSeconds { return work.SeatSeconds(v*1e8 + 0.5) }

// TestLastDispatch follows R and the queues' nextDispatchR through four
// dispatches on the fake clock (C = 2, G = 3 ms, two queues, hand size 1 so
// that hash 0 goes to queue 0 and hash 1 to queue 1) and checks what kube
// publishes as dispatch_r, latest_s, next_s_bounds and
// next_discounted_s_bounds after each.
func TestLastDispatch(t *testing.T) {
	clk := eventclock.NewFake(t0)
	qs := mustQueueSet(t, Config{Name: "virtual", Queues: 2, QueueLengthLimit: 5, HandSize: 1}, 2, clk)
	last := func() DispatchDump { return qs.Dump().LastDispatch }
	if got := last(); got != (DispatchDump{}) {
		t.Fatalf("before any dispatch: %+v, want zero", got)
	}
	// a and b start at once from queue 0 (R = 0); b's scan sees queue 0 at
	// S = 0.003 holding a's seat, so its discounted S is 0.003 − 1×G = 0.
	a := mustStart(t, qs, oneSeat, 0, "a")
	if diff := cmp.Diff(DispatchDump{Dispatches: 1}, last()); diff != "" {
		t.Errorf("after a (-want +got):\n%s", diff)
	}
	b := mustStart(t, qs, oneSeat, 0, "b")
	if diff := cmp.Diff(DispatchDump{Dispatches: 2, S: ss(0.003), SMin: ss(0.003), SMax: ss(0.003)}, last()); diff != "" {
		t.Errorf("after b (-want +got):\n%s", diff)
	}
	c := mustStart(t, qs, oneSeat, 0, "c") // waits in queue 0
	d := mustStart(t, qs, oneSeat, 1, "d") // waits in queue 1, which starts at R = 0
	if got := last().Dispatches; got != 2 {
		t.Fatalf("c and d dispatched (%d dispatches), want both waiting", got)
	}
	// 1 s later a finishes. R advanced at min(4 seats, C=2)/2 active queues =
	// 1 per second; queue 0's next S is corrected by a's 1 s of service to
	// 0.006 + (1 − 0.003) = 1.003. Queue 1's head d finishes first in virtual
	// time (0 + G < 1.003 + G) and goes; queue 0 still holds b's seat.
	clk.Step(time.Second)
	a.Finish(nil)
	want := DispatchDump{Dispatches: 3, R: ss(1), S: 0, SMin: 0, SMax: ss(1.003), DiscountedSMin: 0, DiscountedSMax: 1.003 - 0.003}
	if diff := cmp.Diff(want, last(), approxFloats); diff != "" {
		t.Errorf("after a finished (-want +got):\n%s", diff)
	}
	// 1 s later b finishes: R = 2; queue 0's S becomes 1.003 + (2 − 0.003) = 3,
	// and c is dispatched from it, alone in the scan and with no seats held there.
	clk.Step(time.Second)
	b.Finish(nil)
	want = DispatchDump{Dispatches: 4, R: ss(2), S: ss(3), SMin: ss(3), SMax: ss(3), DiscountedSMin: 3, DiscountedSMax: 3}
	if diff := cmp.Diff(want, last(), approxFloats); diff != "" {
		t.Errorf("after b finished (-want +got):\n%s", diff)
	}
	c.Finish(nil)
	d.Finish(nil)
	checkInvariants(t, qs)
}

// TestLastDispatchWithoutQueues: levels without queues have no virtual world
// and never record a dispatch, as kube publishes no dispatch gauges for them.
func TestLastDispatchWithoutQueues(t *testing.T) {
	for _, queues := range []int{0, Exempt} {
		qs := mustQueueSet(t, Config{Name: "queueless", Queues: queues}, 1, eventclock.NewFake(t0))
		mustStart(t, qs, oneSeat, 0, "a").Finish(nil)
		if got := qs.Dump().LastDispatch; got != (DispatchDump{}) {
			t.Errorf("queues=%d: %+v, want zero", queues, got)
		}
	}
}

var approxFloats = cmp.Comparer(func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 })

// TestNoAccommodation counts the dispatch attempts whose head does not fit,
// by its flow schema: C = 2, one queue; b (2 seats) waits behind a (1 seat)
// and is tried at its own arrival and at c's; when a finishes b fits.
func TestNoAccommodation(t *testing.T) {
	qs := mustQueueSet(t, Config{Name: "hol", Queues: 1, QueueLengthLimit: 5, HandSize: 1}, 2, eventclock.NewFake(t0))
	start := func(seats int, fs string) *Request {
		r, reason := qs.Start(work.Estimate{InitialSeats: seats}, 0, fs, fs, Callbacks{})
		if r == nil {
			t.Fatalf("%s rejected: %s", fs, reason)
		}
		return r
	}
	a := start(1, "a")
	b := start(2, "b")
	c := start(1, "c")
	if diff := cmp.Diff(map[string]int{"b": 2}, qs.Dump().NoAccommodation); diff != "" {
		t.Errorf("with b blocked (-want +got):\n%s", diff)
	}
	a.Finish(nil) // b fits; c then waits for seats, which is no attempt
	b.Finish(nil)
	c.Finish(nil)
	if diff := cmp.Diff(map[string]int{"b": 2}, qs.Dump().NoAccommodation); diff != "" {
		t.Errorf("at the end (-want +got):\n%s", diff)
	}
	checkInvariants(t, qs)
}
