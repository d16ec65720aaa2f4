package processor

import (
	"errors"
	"math"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// DefaultWindow is the default smoothing window of rates.
const DefaultWindow = 10 * time.Second

// ErrStale is returned by Tracker.Observe for a sample not newer than the
// last one observed for its job.
var ErrStale = errors.New("sample older than the last one")

// point is one observation of the cumulative counts.
type point struct {
	at        time.Time
	finished  int
	published int
}

// Tracker keeps the recent samples of one job and computes its progress.
// It is not safe for concurrent use; the processor keeps one per job.
type Tracker struct {
	window time.Duration
	points []point // oldest first, spanning at most one window plus one point

	usage *schemas.Usage // the workers' latest usage (jobs with a cost)
	spent float64        // the cost so far, in price units
}

// Use keeps u as the job's usage if it is newer than the one kept.
func (t *Tracker) Use(u *schemas.Usage) {
	if t.usage == nil || u.At.After(t.usage.At) {
		t.usage = u
	}
}

// NewTracker returns a tracker whose rates are averaged over window
// (DefaultWindow when zero or negative).
func NewTracker(window time.Duration) *Tracker {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Tracker{window: window}
}

// Observe adds s and returns the job's progress at s.At. It returns
// ErrStale, and no progress, for a sample not newer than the previous one.
func (t *Tracker) Observe(s *schemas.Sample) (*schemas.Progress, error) {
	finished := s.Done + s.Dead
	published := max(s.Published, s.Pending+s.InFlight+finished)
	if n := len(t.points); n > 0 && !s.At.After(t.points[n-1].at) {
		return nil, ErrStale
	}
	prevAt := t.last()
	if len(t.points) == 0 && !s.StartedAt.IsZero() && s.StartedAt.Before(s.At) {
		// Nothing was finished when the job started: a rate from the first sample.
		t.points = append(t.points, point{at: s.StartedAt})
	}
	t.points = append(t.points, point{at: s.At, finished: finished, published: published})
	// Keep one point at or before the window's start, so the rate spans the window.
	cut := s.At.Add(-t.window)
	for len(t.points) > 2 && !t.points[1].at.After(cut) {
		t.points = t.points[1:]
	}

	p := &schemas.Progress{
		Job: s.Job, At: s.At, Mode: s.Mode, State: s.State,
		Replicas: s.Replicas, Total: s.Total, Done: s.Done, Dead: s.Dead, Unqueued: s.Unqueued,
		QueueLength: s.Pending, InFlight: s.InFlight, Redeliveries: s.Redelivered,
	}
	p.JobProgress = JobProgress(finished, s.Total)
	p.TimeProgress = TimeProgress(s.StartedAt, s.Deadline, s.At)

	first, last := t.points[0], t.points[len(t.points)-1]
	if span := last.at.Sub(first.at).Seconds(); span > 0 {
		p.Throughput = max(0, float64(last.finished-first.finished)/span)
		p.InputRate = max(0, float64(last.published-first.published)/span)
	}
	if s.Replicas > 0 {
		p.PerReplica = p.Throughput / float64(s.Replicas)
	}
	remaining := max(0, s.Total-finished)
	if s.Total > 0 {
		p.ETA = ETA(remaining, p.Throughput)
		p.ReplicasNeeded = schemas.ReplicasFor(float64(remaining), p.PerReplica*s.Deadline.Sub(s.At).Seconds())
	}
	if s.Mode == schemas.Streaming || s.Total == 0 {
		p.OutputRate = p.Throughput
		p.Backlog = s.Pending + s.InFlight
		p.InputRate = round(p.InputRate)
	} else {
		p.InputRate = 0
	}
	if !s.Oldest.IsZero() && s.Oldest.Before(s.At) && s.Pending+s.InFlight > 0 {
		p.Lag = schemas.Duration(s.At.Sub(s.Oldest))
	}
	if s.Deadline.IsZero() && (s.Mode == schemas.Streaming || s.Total == 0) {
		p.Error = p.OutputRate - p.InputRate
	} else {
		p.Error = p.JobProgress - p.TimeProgress
	}
	if s.Cost != nil {
		t.price(p, s.Cost, prevAt)
	}
	p.JobProgress, p.TimeProgress, p.Error = round(p.JobProgress), round(p.TimeProgress), round(p.Error)
	p.Throughput, p.PerReplica, p.OutputRate = round(p.Throughput), round(p.PerReplica), round(p.OutputRate)
	return p, nil
}

// price adds the cost of the workers' usage to p, as Asperathos'
// kubejobs_cost monitor computed it: the rate is cpu_price × vCPUs +
// memory_price × GB (10⁹ bytes), per hour; what the job spent grows by the
// rate over the time since the previous sample (prevAt). With a desired
// rate the error is rate − desired: positive, the job overspends.
func (t *Tracker) price(p *schemas.Progress, cost *schemas.CostSpec, prevAt time.Time) {
	if u := t.usage; u != nil {
		p.CPUCores, p.MemoryBytes = round(u.CPUCores), u.MemoryBytes
		p.CostRate = round(cost.CPUPrice*u.CPUCores + cost.MemoryPrice*float64(u.MemoryBytes)/1e9)
	}
	if !prevAt.IsZero() {
		t.spent += p.CostRate * p.At.Sub(prevAt).Hours()
	}
	p.Spent = round(t.spent)
	if cost.Desired != nil {
		d := *cost.Desired
		p.DesiredCost, p.Error = &d, p.CostRate-d
	}
}

// last is the time of the newest sample observed (zero before any).
func (t *Tracker) last() time.Time {
	if len(t.points) == 0 {
		return time.Time{}
	}
	return t.points[len(t.points)-1].at
}

// JobProgress is min(1, finished/total); 0 for a job without a total.
func JobProgress(finished, total int) float64 {
	if total <= 0 {
		return 0
	}
	return math.Min(1, float64(finished)/float64(total))
}

// AsperathosCompleted is how Asperathos' kubejobs monitor counts finished
// items: everything no longer queued or processing, N − (queued + processing).
// Pace counts results and dead letters instead (see the package comment).
func AsperathosCompleted(total, queued, processing int) int {
	return total - (queued + processing)
}

// TimeProgress is (at − started)/(deadline − started) with sub-second
// resolution, not capped at 1; 0 without a start or a deadline, or before the start.
func TimeProgress(started, deadline, at time.Time) float64 {
	if started.IsZero() || deadline.IsZero() || !deadline.After(started) || at.Before(started) {
		return 0
	}
	return at.Sub(started).Seconds() / deadline.Sub(started).Seconds()
}

// ETA is remaining/throughput: zero when nothing remains, nil when unknown
// (no throughput yet).
func ETA(remaining int, throughput float64) *schemas.Duration {
	if remaining <= 0 {
		d := schemas.Duration(0)
		return &d
	}
	if throughput <= 0 {
		return nil
	}
	d := schemas.Duration(time.Duration(float64(remaining) / throughput * float64(time.Second)).Round(time.Millisecond))
	return &d
}

// round keeps 6 decimals, so that JSON and Influx carry no float noise.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
