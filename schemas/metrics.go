package schemas

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MetricKind is the last token of a metrics subject.
type MetricKind string

// Metric kinds.
const (
	RawMetrics      MetricKind = "raw"
	ProgressMetrics MetricKind = "progress"
)

// Sample is a collector's snapshot of one job's queue, on pace.metrics.<job>.raw.
type Sample struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	// Total is the number of items of a batch job (0 for streaming jobs).
	Total int `json:"total,omitempty"`
	// Pending items wait in the main queue; InFlight are delivered, not acked.
	Pending  int `json:"pending"`
	InFlight int `json:"in_flight"`
	// Done counts results; Dead counts dead letters.
	Done        int `json:"done"`
	Dead        int `json:"dead"`
	Redelivered int `json:"redelivered"`
	Replicas    int `json:"replicas"`
	// Published counts items ever published to the job (streaming input).
	Published int       `json:"published,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	Deadline  Duration  `json:"deadline,omitempty"`
}

// Schema implements Message.
func (*Sample) Schema() (string, int) { return "sample", 1 }

// Validate implements Message.
func (s *Sample) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), s.Job)
	if s.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	for name, v := range map[string]int{"total": s.Total, "pending": s.Pending, "in_flight": s.InFlight,
		"done": s.Done, "dead": s.Dead, "redelivered": s.Redelivered, "replicas": s.Replicas, "published": s.Published} {
		errs = nonNegative(errs, field.NewPath(name), v)
	}
	return errs
}

// Progress is the processor's view of a job, on pace.metrics.<job>.progress.
// Error = JobProgress - TimeProgress: negative means late (Asperathos' sign).
type Progress struct {
	Job          string    `json:"job"`
	At           time.Time `json:"at"`
	JobProgress  float64   `json:"job_progress"`
	TimeProgress float64   `json:"time_progress"`
	Error        float64   `json:"error"`
	Replicas     int       `json:"replicas"`
	// Throughput is items per second, smoothed; PerReplica divides it by Replicas.
	Throughput float64 `json:"throughput"`
	PerReplica float64 `json:"per_replica"`
	// ETA is the estimated time left; 0 when unknown.
	ETA            Duration `json:"eta,omitempty"`
	ReplicasNeeded int      `json:"replicas_needed,omitempty"`
	QueueLength    int      `json:"queue_length"`
	InFlight       int      `json:"in_flight"`
	Redeliveries   int      `json:"redeliveries"`
	Dead           int      `json:"dead"`
	// Streaming jobs: items/s in and out, and the backlog.
	InputRate  float64 `json:"input_rate,omitempty"`
	OutputRate float64 `json:"output_rate,omitempty"`
	Backlog    int     `json:"backlog,omitempty"`
	// Lag is how long the oldest waiting item has waited.
	Lag Duration `json:"lag,omitempty"`
}

// Schema implements Message.
func (*Progress) Schema() (string, int) { return "progress", 1 }

// Validate implements Message.
func (p *Progress) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), p.Job)
	if p.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	for name, v := range map[string]int{"replicas": p.Replicas, "replicas_needed": p.ReplicasNeeded,
		"queue_length": p.QueueLength, "in_flight": p.InFlight, "redeliveries": p.Redeliveries, "dead": p.Dead, "backlog": p.Backlog} {
		errs = nonNegative(errs, field.NewPath(name), v)
	}
	return errs
}

func nonNegative(errs field.ErrorList, p *field.Path, v int) field.ErrorList {
	if v < 0 {
		errs = append(errs, field.Invalid(p, v, "must be >= 0"))
	}
	return errs
}
