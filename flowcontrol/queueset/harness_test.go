package queueset

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/integrator"
	"github.com/pace-platform/pace/flowcontrol/work"
)

// This file replays kube-apiserver's uniformScenario load model (reference
// §8.1) on a discrete-event clock: every client thread is a chain of events,
// so a run is exactly repeatable.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// uniformClient is a set of threads that each make nCalls calls in a row.
type uniformClient struct {
	hash             uint64
	nThreads, nCalls int
	exec, think      time.Duration
	initialSeats     int
	finalSeats       int
	pad              time.Duration
	split            bool // second half of the threads starts at evalDuration/2 with nCalls/2
}

func uc(hash uint64, nThreads, nCalls int, exec, think time.Duration) uniformClient {
	return uniformClient{hash: hash, nThreads: nThreads, nCalls: nCalls, exec: exec, think: think, initialSeats: 1, finalSeats: 1}
}

func (c uniformClient) width(w int) uniformClient { c.initialSeats = w; return c }
func (c uniformClient) padded(finalSeats int, d time.Duration) uniformClient {
	c.finalSeats, c.pad = finalSeats, d
	return c
}
func (c uniformClient) splitHalves() uniformClient { c.split = true; return c }

type scenario struct {
	cfg              Config
	limit            int
	clients          []uniformClient
	evalDuration     time.Duration
	expectedAverages []float64 // overrides fairAlloc
	margin           float64
	margins          []float64 // per evaluation point; overrides margin
	expectFair       []bool    // per evaluation point: one, or two for split scenarios
	expectAll        bool
	rejectReason     Reason
	epochAdvances    int
}

type scenarioRun struct {
	t          *testing.T
	s          scenario
	clk        *eventclock.Fake
	qs         *QueueSet
	execSeats  []*integrator.Integrator
	demandChk  *integrator.Integrator
	rejects    []int
	executions []int
	failed     int
}

func runScenario(t *testing.T, s scenario) {
	t.Helper()
	clk := eventclock.NewFake(t0)
	qs, err := New(clk, s.cfg, s.limit)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	run := &scenarioRun{t: t, s: s, clk: clk, qs: qs, demandChk: integrator.New(clk),
		rejects: make([]int, len(s.clients)), executions: make([]int, len(s.clients))}
	split := false
	for i, c := range s.clients {
		run.execSeats = append(run.execSeats, integrator.New(clk))
		split = split || c.split
		for j := range c.nThreads {
			delay, nCalls := time.Duration(90*j+20*i), c.nCalls
			if c.split && j >= c.nThreads/2 {
				delay += s.evalDuration / 2
				nCalls /= 2
			}
			clk.EventAfterDuration(run.call(i, j, 0, nCalls), delay)
		}
	}
	if split {
		run.evalTo(t0.Add(s.evalDuration/2), false, s.expectFair[0])
		run.evalTo(t0.Add(s.evalDuration), true, s.expectFair[1])
	} else {
		run.evalTo(t0.Add(s.evalDuration), true, s.expectFair[0])
	}
	clk.Run(t0.Add(1000 * s.evalDuration)) // drain
	run.finalReview()
}

// call returns the event that makes call k of thread j of client i.
func (run *scenarioRun) call(i, j, k, nCalls int) func(time.Time) {
	return func(time.Time) {
		if k >= nCalls {
			return
		}
		c := run.s.clients[i]
		maxWidth := float64(max(c.initialSeats, c.finalSeats))
		run.demandChk.Add(maxWidth)
		label := fmt.Sprintf("%d:%d:%d", i, j, k)
		est := work.Estimate{InitialSeats: c.initialSeats, FinalSeats: c.finalSeats, AdditionalLatency: c.pad}
		onDispatch := func(r *Request) { // runs under qs.mu: only schedule and count here
			run.executions[i]++
			run.execSeats[i].Add(float64(c.initialSeats))
			run.clk.EventAfterDuration(run.call(i, j, k+1, nCalls), c.exec+c.think)
			run.clk.EventAfterDuration(func(time.Time) {
				run.execSeats[i].Add(-float64(c.initialSeats))
				run.clk.EventAfterDuration(func(time.Time) { run.demandChk.Add(-maxWidth) }, c.pad)
				r.Finish(nil)
				run.check()
			}, c.exec)
		}
		r, reason := run.qs.Start(est, c.hash, fmt.Sprintf("client%d", i), label, Callbacks{Dispatched: onDispatch})
		if r == nil {
			if reason != run.s.rejectReason {
				run.t.Errorf("%s rejected for %q, want %q", label, reason, run.s.rejectReason)
			}
			run.failed++
			run.rejects[i]++
			run.demandChk.Add(-maxWidth)
		} else if k%100 == 0 && !dumpHasLabel(run.qs.Dump(), label) {
			run.t.Errorf("dump lacks request %s", label)
		}
		run.check()
	}
}

func (run *scenarioRun) check() {
	if err := run.qs.CheckInvariants(); err != nil {
		run.t.Fatalf("at %v: %v", run.clk.Now().Sub(t0), err)
	}
}

func dumpHasLabel(d Dump, label string) bool {
	has := func(rs []RequestDump) bool {
		for _, r := range rs {
			if r.Label == label {
				return true
			}
		}
		return false
	}
	if has(d.QueuelessExecuting) {
		return true
	}
	for _, q := range d.Queues {
		if has(q.Waiting) || has(q.Executing) {
			return true
		}
	}
	return false
}

func (run *scenarioRun) evalTo(lim time.Time, last, expectFair bool) {
	t := run.t
	margin := run.s.margin
	if run.s.margins != nil {
		margin = run.s.margins[0]
		if last {
			margin = run.s.margins[len(run.s.margins)-1]
		}
	}
	run.clk.Step(lim.Sub(run.clk.Now()))
	demands := make([]float64, len(run.s.clients))
	averages := make([]float64, len(run.s.clients))
	for i, c := range run.s.clients {
		n := c.nThreads
		if c.split && !last {
			n /= 2
		}
		demands[i] = float64(n) * float64(c.initialSeats) * float64(c.exec) / float64(c.exec+c.think)
		averages[i] = run.execSeats[i].Reset().Average
	}
	want := run.s.expectedAverages
	if want == nil {
		want = fairAlloc(demands, float64(run.s.limit))
	}
	for i := range run.s.clients {
		var fair bool
		if want[i] > 0 {
			fair = math.Abs(averages[i]-want[i])/want[i] <= margin
		} else {
			fair = math.Abs(averages[i]) <= margin
		}
		if fair != expectFair {
			t.Errorf("client %d last=%v: average %.12g, expected %.12g, margin %v: fair=%v, want %v",
				i, last, averages[i], want[i], margin, fair, expectFair)
		} else {
			t.Logf("client %d last=%v: average %.12g, expected %.12g", i, last, averages[i], want[i])
		}
	}
	got, chk := run.qs.SeatDemand().Results(), run.demandChk.Results()
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"duration", got.Duration, chk.Duration}, {"average", got.Average, chk.Average}, {"deviation", nanTo0(got.Deviation), nanTo0(chk.Deviation)}} {
		if !closeRel(f.got, f.want, 1e-10) {
			t.Errorf("seat demand %s = %.15g, independent integrator says %.15g", f.name, f.got, f.want)
		}
	}
}

func (run *scenarioRun) finalReview() {
	t, s := run.t, run.s
	if s.expectAll && run.failed > 0 {
		t.Errorf("%d requests failed, want none", run.failed)
	} else if !s.expectAll && run.failed == 0 {
		t.Errorf("all requests succeeded, want some rejected")
	}
	d := run.qs.Dump()
	totalRejects := 0
	for _, n := range run.rejects {
		totalRejects += n
	}
	if d.Waiting != 0 || d.Executing != 0 || d.SeatsInUse != 0 || d.SeatsWaiting != 0 || d.Rejected != totalRejects {
		t.Errorf("after drain: waiting %d, executing %d, seats in use %d, seats waiting %d, rejected %d; want 0,0,0,0,%d",
			d.Waiting, d.Executing, d.SeatsInUse, d.SeatsWaiting, d.Rejected, totalRejects)
	}
	if d.EpochAdvances != s.epochAdvances || d.EpochAdvanceFailure != 0 {
		t.Errorf("epoch advances = %d (failures %d), want %d", d.EpochAdvances, d.EpochAdvanceFailure, s.epochAdvances)
	}
}

// fairAlloc is max-min fair water-filling of demands into capacity, the
// harness's notion of the ideal (reference §8.1).
func fairAlloc(demands []float64, capacity float64) []float64 {
	idx := make([]int, len(demands))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return demands[idx[a]] < demands[idx[b]] })
	alloc := make([]float64, len(demands))
	prev, next := 0.0, 0
	for ; next < len(idx); next++ {
		d := demands[idx[next]]
		if d <= 0 {
			continue
		}
		bite := float64(len(idx)-next) * (d - prev)
		if bite > capacity {
			break
		}
		prev, alloc[idx[next]] = d, d
		capacity -= bite
	}
	for j := next; j < len(idx); j++ {
		alloc[idx[j]] = prev + capacity/float64(len(idx)-next)
	}
	return alloc
}

func nanTo0(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

func closeRel(a, b, tol float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b)/math.Max(math.Abs(a), math.Abs(b)) <= tol
}
