package queueset

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// opStream turns fuzz bytes into small numbers; it yields zeros when exhausted.
type opStream struct{ b []byte }

func (s *opStream) next(n int) int {
	if len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0]) % n
	s.b = s.b[1:]
	return v
}

// exercise drives a queue set with random operations and checks, after each:
// the invariants (including "no dispatch above C except a lone too-wide
// request"), that every request is dispatched at most once and never after
// being withdrawn, and at the end that every start was dispatched or rejected
// exactly once and all counters are back to zero.
func exercise(t *testing.T, ops *opStream) {
	clk := eventclock.NewFake(t0)
	cfgs := []Config{
		{Queues: 4, QueueLengthLimit: 2, HandSize: 2},
		{Queues: 8, QueueLengthLimit: 3, HandSize: 3},
		{Queues: 1, QueueLengthLimit: 1, HandSize: 1},
		{Queues: 0},
		{Queues: Exempt},
	}
	qs, err := New(clk, cfgs[ops.next(len(cfgs))], ops.next(6))
	if err != nil {
		t.Fatal(err)
	}
	dispatchCount := map[*Request]int{}
	var executing, waiting []*Request
	starts, rejected := 0, 0
	onDispatch := func(r *Request) { dispatchCount[r]++ }
	for len(ops.b) > 0 {
		switch ops.next(6) {
		case 0, 1: // arrival
			est := work.Estimate{InitialSeats: 1 + ops.next(4), FinalSeats: ops.next(5),
				AdditionalLatency: time.Duration(ops.next(3)) * 50 * time.Millisecond}
			starts++
			r, reason := qs.Start(est, uint64(ops.next(256))*0x9e3779b97f4a7c15, "fs", "", Callbacks{Dispatched: onDispatch})
			if r == nil {
				if reason == "" {
					t.Fatal("nil request without a reason")
				}
				rejected++
				continue
			}
			waiting = append(waiting, r)
		case 2: // finish one executing request
			if len(executing) > 0 {
				i := ops.next(len(executing))
				executing[i].Finish(nil)
				executing = append(executing[:i], executing[i+1:]...)
			}
		case 3: // withdraw one waiting request
			if len(waiting) > 0 {
				i := ops.next(len(waiting))
				if waiting[i].Cancel() {
					rejected++
					if dispatchCount[waiting[i]] != 0 {
						t.Fatal("withdrew a dispatched request")
					}
				}
			}
		case 4:
			clk.Step(time.Duration(ops.next(200)) * time.Millisecond)
		case 5:
			cfg := cfgs[ops.next(len(cfgs))]
			if err := qs.Reconfigure(cfg, ops.next(6)); err != nil {
				t.Fatal(err)
			}
		}
		waiting, executing = sortOut(t, waiting, executing, dispatchCount)
		if err := qs.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	// Drain: give enough seats, finish everything, let final seats expire.
	qs.SetConcurrencyLimit(100)
	for len(waiting)+len(executing) > 0 {
		waiting, executing = sortOut(t, waiting, executing, dispatchCount)
		for _, r := range executing {
			r.Finish(nil)
		}
		executing = nil
		clk.Step(time.Second)
	}
	clk.Step(time.Minute)
	d := qs.Dump()
	if d.Waiting != 0 || d.Executing != 0 || d.SeatsInUse != 0 || d.SeatsWaiting != 0 || !qs.IsIdle() {
		t.Fatalf("not idle after drain: %+v", d)
	}
	if d.Dispatched+d.Rejected != starts || d.Rejected != rejected || len(dispatchCount) != d.Dispatched {
		t.Fatalf("starts %d: dispatched %d (seen %d) + rejected %d (seen %d)", starts, d.Dispatched, len(dispatchCount), d.Rejected, rejected)
	}
	for _, n := range dispatchCount {
		if n != 1 {
			t.Fatalf("a request was dispatched %d times", n)
		}
	}
	if err := qs.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// sortOut moves newly dispatched requests from waiting to executing and drops
// withdrawn ones.
func sortOut(t *testing.T, waiting, executing []*Request, dispatched map[*Request]int) ([]*Request, []*Request) {
	t.Helper()
	kept := waiting[:0]
	for _, r := range waiting {
		switch r.state {
		case stateWaiting:
			kept = append(kept, r)
		case stateExecuting:
			if dispatched[r] != 1 {
				t.Fatalf("executing request dispatched %d times", dispatched[r])
			}
			executing = append(executing, r)
		}
	}
	return kept, executing
}

func TestQueueSetProperties(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := make([]byte, 400)
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		exercise(t, &opStream{b: b})
	}
}

func FuzzQueueSet(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 1, 2, 0, 0, 4, 3, 0, 1, 3, 2, 1, 4, 50})
	f.Add([]byte{3, 0, 0, 2, 1, 1, 1, 0, 0, 1, 5, 1, 2, 2, 2, 0, 9, 9, 3, 0})
	f.Add([]byte{1, 2, 0, 3, 4, 0, 9, 5, 3, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, data []byte) { exercise(t, &opStream{b: data}) })
}
