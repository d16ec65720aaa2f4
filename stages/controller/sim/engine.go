package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// epoch is the simulated job's start; simulated time never reads a clock.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type eventKind int

const (
	evReady eventKind = iota
	evDone
	evCrash
	evLease
	evSample
	evActuate
	evArrival
	evBurst
	evEnd
)

type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	w    *worker
	gen  int
	item int
	n    int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type workerState int

const (
	starting workerState = iota
	idle
	busy
	draining // asked to stop while busy: finishes its item, then exits
)

type worker struct {
	id, slot int
	state    workerState
	gen      int
	item     int
	created  time.Duration
	takenAt  time.Duration
	// crashedAt is when a worker restarting after a crash went down; -1 otherwise.
	crashedAt time.Duration
}

// engine is one run of one job with one controller.
type engine struct {
	s    Scenario
	ctrl plugin.Controller
	frng *rand.Rand // failures
	arng *rand.Rand // arrivals and streaming service times
	draw func(*rand.Rand) float64

	now    time.Duration
	events eventHeap
	seq    uint64

	svc     []float64       // nominal service time per item (s)
	crashes []int           // attempts left to crash per item
	arrived []time.Duration // arrival time per item
	queue   []int
	workers []*worker
	speeds  []float64
	used    []bool
	nextID  int

	desired                 int
	done, redelivered, lost int
	doneTime, firstDone     time.Duration // the done items' durations, and when the first ended
	dispatchFree            time.Duration
	replicaTime             time.Duration
	crashTime               time.Duration // within replicaTime: crashed attempts and restarts
	over                    bool
	finishAt                time.Duration
	actions                 int
	lastDecision            time.Duration
	decided                 bool
	peak                    int
	latencies               []float64
	mon                     monitor

	series    []Point
	decisions []DecisionPoint
}

func newEngine(s Scenario, ctrl plugin.Controller, seed uint64) *engine {
	e := &engine{
		s: s, ctrl: ctrl,
		frng:    rand.New(rand.NewPCG(seed, 2)),
		arng:    rand.New(rand.NewPCG(seed, 3)),
		draw:    s.Service.sampler(),
		speeds:  s.Service.speeds(2*s.Replicas.Max, rand.New(rand.NewPCG(seed, 4))), // draining replicas keep their slot
		used:    make([]bool, 2*s.Replicas.Max),
		mon:     monitor{window: s.RateWindow.D()},
		desired: s.Replicas.Initial,
	}
	if s.Mode == schemas.Batch {
		e.svc = itemTimes(s, seed)
		e.crashes = itemCrashes(s, len(e.svc), seed)
		e.arrived = make([]time.Duration, len(e.svc))
		e.queue = make([]int, len(e.svc))
		for i := range e.queue {
			e.queue[i] = i
		}
	}
	return e
}

// itemCrashes draws how many attempts of each of n items crash their worker
// (each attempt with the failure rate); the oracle sees the same counts.
func itemCrashes(s Scenario, n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]int, n)
	for i := range out {
		out[i] = crashCount(s, rng)
	}
	return out
}

func crashCount(s Scenario, rng *rand.Rand) int {
	n := 0
	for s.Workers.FailureRate > 0 && rng.Float64() < s.Workers.FailureRate {
		n++
	}
	return n
}

// itemTimes draws a batch job's service times; the oracle sees the same ones.
func itemTimes(s Scenario, seed uint64) []float64 {
	rng, draw := rand.New(rand.NewPCG(seed, 1)), s.Service.sampler()
	out := make([]float64, s.Items)
	for i := range out {
		out[i] = draw(rng)
	}
	return out
}

func (e *engine) push(ev event) {
	e.seq++
	ev.seq = e.seq
	heap.Push(&e.events, ev)
}

func (e *engine) run() error {
	e.apply(e.s.Replicas.Initial)
	e.push(event{at: e.s.MonitorPeriod.D(), kind: evSample})
	e.push(event{at: e.s.Duration.D(), kind: evEnd})
	if e.s.Mode == schemas.Streaming {
		e.push(event{at: 0, kind: evArrival})
		if e.s.Arrivals.Kind == "bursts" && e.s.Arrivals.BurstEvery > 0 {
			e.push(event{at: e.s.Arrivals.BurstEvery.D(), kind: evBurst})
		}
	}
	for !e.over && len(e.events) > 0 {
		ev := heap.Pop(&e.events).(event)
		e.now = ev.at
		if err := e.handle(ev); err != nil {
			return err
		}
	}
	for _, w := range e.workers {
		e.replicaTime += e.now - w.created
		e.restarted(w)
	}
	return nil
}

// restarted accounts for the restart of w, if it was restarting, up to now.
func (e *engine) restarted(w *worker) {
	if w.crashedAt >= 0 {
		e.crashTime += e.now - w.crashedAt
		w.crashedAt = -1
	}
}

func (e *engine) handle(ev event) error {
	switch ev.kind {
	case evReady:
		if ev.w.gen == ev.gen {
			e.restarted(ev.w)
			e.take(ev.w)
		}
	case evDone:
		if ev.w.gen != ev.gen {
			return nil
		}
		e.done++
		e.doneTime += e.now - ev.w.takenAt
		if e.done == 1 {
			e.firstDone = e.now
		}
		e.latencies = append(e.latencies, (e.now - e.arrived[ev.item]).Seconds())
		if e.s.Mode == schemas.Batch && e.done == len(e.svc) {
			e.over, e.finishAt = true, e.now
			return nil
		}
		if ev.w.state == draining {
			e.exit(ev.w)
			return nil
		}
		e.take(ev.w)
	case evCrash:
		if ev.w.gen != ev.gen {
			return nil
		}
		e.lost++
		e.crashTime += e.now - ev.w.takenAt
		e.push(event{at: max(e.now, ev.w.takenAt+e.s.Workers.Lease.D()), kind: evLease, item: ev.item})
		if ev.w.state == draining {
			e.exit(ev.w)
			return nil
		}
		ev.w.gen++
		ev.w.state, ev.w.item, ev.w.crashedAt = starting, -1, e.now
		e.push(event{at: e.now + e.s.Workers.Startup.D(), kind: evReady, w: ev.w, gen: ev.w.gen})
	case evLease:
		e.lost--
		e.redelivered++
		e.requeue(ev.item)
	case evSample:
		if err := e.sample(); err != nil {
			return err
		}
		e.push(event{at: e.now + e.s.MonitorPeriod.D(), kind: evSample})
	case evActuate:
		e.apply(ev.n)
	case evArrival:
		e.arrive(1)
		if r := e.s.Arrivals.rate(e.now.Seconds()); r > 0 {
			gap := time.Duration(e.arng.ExpFloat64() / r * float64(time.Second))
			e.push(event{at: e.now + max(gap, time.Microsecond), kind: evArrival})
		} else {
			e.push(event{at: e.now + time.Second, kind: evArrival})
		}
	case evBurst:
		e.arrive(e.s.Arrivals.BurstSize)
		e.push(event{at: e.now + e.s.Arrivals.BurstEvery.D(), kind: evBurst})
	case evEnd:
		e.over = true
	}
	return nil
}

// arrive adds n streaming items.
func (e *engine) arrive(n int) {
	for range n {
		e.svc = append(e.svc, e.draw(e.arng))
		e.crashes = append(e.crashes, crashCount(e.s, e.frng))
		e.arrived = append(e.arrived, e.now)
		e.queue = append(e.queue, len(e.svc)-1)
	}
	e.wake()
}

// requeue puts an item back at the head of the queue (a redelivery).
func (e *engine) requeue(item int) {
	e.queue = append([]int{item}, e.queue...)
	e.wake()
}

func (e *engine) wake() {
	for _, w := range e.workers {
		if len(e.queue) == 0 {
			return
		}
		if w.state == idle {
			e.take(w)
		}
	}
}

// take gives w the next item, or leaves it idle.
func (e *engine) take(w *worker) {
	if len(e.queue) == 0 {
		w.state, w.item = idle, -1
		return
	}
	item := e.queue[0]
	e.queue = e.queue[1:]
	w.state, w.item, w.takenAt = busy, item, e.now
	start := e.now
	if d := e.s.Workers.Dispatch.D(); d > 0 {
		start = max(e.now, e.dispatchFree) + d
		e.dispatchFree = start
	}
	factor := 1.0
	if e.s.Slowdown.Factor != 1 && start >= e.s.Slowdown.At.D() {
		factor = e.s.Slowdown.Factor
	}
	work := e.svc[item] * e.speeds[w.slot] * factor
	dur := start - e.now + e.s.Workers.Overhead.D() + time.Duration(work*float64(time.Second))
	if e.crashes[item] > 0 {
		e.crashes[item]--
		e.push(event{at: e.now + dur/2, kind: evCrash, w: w, gen: w.gen, item: item})
		return
	}
	e.push(event{at: e.now + dur, kind: evDone, w: w, gen: w.gen, item: item})
}

// apply sets the number of replicas to n within [min, max]. A scale-down
// stops starting replicas first, then idle ones, then busy ones, which drain:
// they finish their item (SIGTERM-graceful) and then exit.
func (e *engine) apply(n int) {
	n = min(max(n, e.s.Replicas.Min), e.s.Replicas.Max)
	for e.pool() < n {
		slot := slices.Index(e.used, false)
		e.used[slot] = true
		e.nextID++
		w := &worker{id: e.nextID, slot: slot, state: starting, item: -1, created: e.now, crashedAt: -1}
		e.workers = append(e.workers, w)
		e.push(event{at: e.now + e.s.Workers.Startup.D(), kind: evReady, w: w, gen: w.gen})
	}
	e.peak = max(e.peak, len(e.workers))
	for e.pool() > n {
		victim := -1
		for _, st := range []workerState{starting, idle, busy} {
			for i := len(e.workers) - 1; i >= 0; i-- {
				if e.workers[i].state == st {
					victim = i
					break
				}
			}
			if victim >= 0 {
				break
			}
		}
		w := e.workers[victim]
		if w.state == busy {
			w.state = draining
			continue
		}
		e.exit(w)
	}
}

// pool is the number of workers not draining.
func (e *engine) pool() int {
	n := 0
	for _, w := range e.workers {
		if w.state != draining {
			n++
		}
	}
	return n
}

// exit removes w and accounts for its lifetime.
func (e *engine) exit(w *worker) {
	i := slices.Index(e.workers, w)
	e.workers = slices.Delete(e.workers, i, i+1)
	e.used[w.slot] = false
	e.replicaTime += e.now - w.created
	e.restarted(w)
	w.gen++
}

func (e *engine) sample() error {
	live, inFlight := 0, e.lost
	for _, w := range e.workers {
		if w.state == idle || w.state == busy {
			live++
		}
		if w.state == busy || w.state == draining {
			inFlight++
		}
	}
	smp := schemas.Sample{
		Job: "sim", At: epoch.Add(e.now), Mode: e.s.Mode, State: schemas.JobState("ongoing"),
		Pending: len(e.queue), InFlight: inFlight, Done: e.done, Redelivered: e.redelivered,
		Replicas: live, Published: len(e.svc), StartedAt: epoch,
	}
	if e.s.Mode == schemas.Batch {
		smp.Total = len(e.svc)
		smp.Deadline = epoch.Add(e.s.Deadline.D())
	}
	p := e.mon.observe(smp)
	e.series = append(e.series, Point{
		T: e.now.Seconds(), JobProgress: p.JobProgress, TimeProgress: p.TimeProgress, Error: p.Error,
		Replicas: live, Desired: e.desired, Done: e.done, Queue: len(e.queue),
	})
	if e.decided && e.now-e.lastDecision < e.s.CheckInterval.D() {
		return nil
	}
	d, err := e.ctrl.Decide(p)
	if err != nil {
		return fmt.Errorf("at %s: %w", e.now, err)
	}
	e.decided, e.lastDecision = true, e.now
	n := min(max(d.Replicas, e.s.Replicas.Min), e.s.Replicas.Max)
	if n != e.desired {
		e.actions++
		e.desired = n
		e.decisions = append(e.decisions, DecisionPoint{T: e.now.Seconds(), Replicas: n, Reason: d.Reason})
		e.push(event{at: e.now + e.s.ActuationDelay.D(), kind: evActuate, n: n})
	}
	return nil
}

// p99 returns the 99th percentile of xs (nearest rank); 0 for none.
func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(math.Ceil(0.99*float64(len(s))))-1]
}
