package sim

import (
	"math"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// monitor turns queue snapshots into progress messages with the formulas of
// the processor stage (docs/monitoring.md): progress over finished items,
// time progress over the deadline, rates over a sliding window. It is a copy
// rather than an import because stages do not import each other; the
// simulator's regression test pins the shared cases.
type monitor struct {
	window time.Duration
	points []mpoint
}

type mpoint struct {
	at                  time.Time
	finished, published int
}

func (m *monitor) observe(s schemas.Sample) schemas.Progress {
	finished := s.Done + s.Dead
	published := max(s.Published, s.Pending+s.InFlight+finished)
	if len(m.points) == 0 && s.StartedAt.Before(s.At) {
		m.points = append(m.points, mpoint{at: s.StartedAt})
	}
	m.points = append(m.points, mpoint{s.At, finished, published})
	cut := s.At.Add(-m.window)
	for len(m.points) > 2 && !m.points[1].at.After(cut) {
		m.points = m.points[1:]
	}
	p := schemas.Progress{
		Job: s.Job, At: s.At, Mode: s.Mode, State: s.State,
		Replicas: s.Replicas, Total: s.Total, Done: s.Done, Dead: s.Dead,
		QueueLength: s.Pending, InFlight: s.InFlight, Redeliveries: s.Redelivered,
	}
	if s.Total > 0 {
		p.JobProgress = math.Min(1, float64(finished)/float64(s.Total))
	}
	if !s.Deadline.IsZero() {
		p.TimeProgress = s.At.Sub(s.StartedAt).Seconds() / s.Deadline.Sub(s.StartedAt).Seconds()
	}
	first, last := m.points[0], m.points[len(m.points)-1]
	if span := last.at.Sub(first.at).Seconds(); span > 0 {
		p.Throughput = max(0, float64(last.finished-first.finished)/span)
		p.InputRate = max(0, float64(last.published-first.published)/span)
	}
	if s.Replicas > 0 {
		p.PerReplica = p.Throughput / float64(s.Replicas)
	}
	if s.Mode == schemas.Streaming {
		p.OutputRate = p.Throughput
		p.Backlog = s.Pending + s.InFlight
		p.Error = p.OutputRate - p.InputRate
	} else {
		p.InputRate = 0
		p.Error = p.JobProgress - p.TimeProgress
	}
	p.JobProgress, p.TimeProgress, p.Error = round6(p.JobProgress), round6(p.TimeProgress), round6(p.Error)
	p.Throughput, p.PerReplica = round6(p.Throughput), round6(p.PerReplica)
	p.OutputRate, p.InputRate = round6(p.OutputRate), round6(p.InputRate)
	return p
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
