package schemas

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MetricKind is the last token of a metrics subject.
type MetricKind string

// Metric kinds.
const (
	// RawMetrics are the collector's samples.
	RawMetrics MetricKind = "raw"
	// ProgressMetrics are the processor's progress messages.
	ProgressMetrics MetricKind = "progress"
	// UsageMetrics are the resources a job's workers use, measured by the
	// runtime that runs them, for jobs with a cost.
	UsageMetrics MetricKind = "usage"
	// DeadMetrics are raw samples the processor could not read, kept as
	// dead letters (reason malformed) beside the job's metrics rather than
	// on pace.dead.<job>, whose count is the job's dead items.
	DeadMetrics MetricKind = "dead"
)

// Sample is a collector's snapshot of one job's queue, on pace.metrics.<job>.raw.
// Counts come from the JetStream API at time At; see docs/monitoring.md.
type Sample struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	// Mode and State are the job's, from its record.
	Mode  JobMode  `json:"mode,omitempty"`
	State JobState `json:"state,omitempty"`
	// Total is the number of items of a batch job (0 for streaming jobs).
	Total int `json:"total,omitempty"`
	// Pending items wait in the main queue; InFlight are delivered, not acked.
	Pending  int `json:"pending"`
	InFlight int `json:"in_flight"`
	// Done counts results; Dead counts dead letters.
	Done int `json:"done"`
	Dead int `json:"dead"`
	// Unqueued counts the results Done leaves out: for items the job never
	// queued (or its ledger has not entered yet), which the manager sets
	// aside, or, for a moment, items finished while the job was sampled.
	Unqueued int `json:"unqueued,omitempty"`
	// Redelivered counts unacknowledged items delivered more than once.
	Redelivered int `json:"redelivered"`
	// Replicas is the number of live workers of the job.
	Replicas int `json:"replicas"`
	// Published counts items ever queued for the job: Pending + InFlight + Done + Dead.
	Published int `json:"published,omitempty"`
	// StartedAt is when the job started; Deadline when a batch job is due (zero: none).
	StartedAt time.Time `json:"started_at,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// Oldest is when the oldest unfinished item was queued (zero: none or unknown).
	Oldest time.Time `json:"oldest,omitzero"`
	// Cost is the job's, from its spec: the processor prices its usage.
	Cost *CostSpec `json:"cost,omitempty"`
}

// Usage is what a job's workers use, on pace.metrics.<job>.usage: the sum
// over its live replicas (processes, or pods from the metrics API).
type Usage struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	// CPUCores is the vCPUs in use, averaged since the last measure.
	CPUCores float64 `json:"cpu_cores"`
	// MemoryBytes is the memory held (resident set, or the pods' working set).
	MemoryBytes int64 `json:"memory_bytes"`
	Replicas    int   `json:"replicas"`
	// Source is "local" (worker processes) or "metrics-api" (pods).
	Source string `json:"source,omitempty"`
}

// Schema implements Message.
func (*Usage) Schema() (string, int) { return "usage", 1 }

// Validate implements Message.
func (u *Usage) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), u.Job)
	if u.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	if u.CPUCores < 0 || math.IsNaN(u.CPUCores) || math.IsInf(u.CPUCores, 0) {
		errs = append(errs, field.Invalid(field.NewPath("cpu_cores"), u.CPUCores, "must be a finite number >= 0"))
	}
	if u.MemoryBytes < 0 {
		errs = append(errs, field.Invalid(field.NewPath("memory_bytes"), u.MemoryBytes, "must be >= 0"))
	}
	return nonNegative(errs, field.NewPath("replicas"), u.Replicas)
}

// Schema implements Message.
func (*Sample) Schema() (string, int) { return "sample", 1 }

// Validate implements Message.
func (s *Sample) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), s.Job)
	if s.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"total", s.Total}, {"pending", s.Pending}, {"in_flight", s.InFlight}, {"done", s.Done}, {"dead", s.Dead},
		{"redelivered", s.Redelivered}, {"replicas", s.Replicas}, {"published", s.Published}} {
		errs = nonNegative(errs, field.NewPath(c.name), c.v)
	}
	if s.State != "" {
		errs = validateState(errs, field.NewPath("state"), s.State)
	}
	if s.Mode != "" && s.Mode != Batch && s.Mode != Streaming {
		errs = append(errs, field.NotSupported(field.NewPath("mode"), s.Mode, []JobMode{Batch, Streaming}))
	}
	if !s.Deadline.IsZero() && !s.StartedAt.IsZero() && !s.Deadline.After(s.StartedAt) {
		errs = append(errs, field.Invalid(field.NewPath("deadline"), s.Deadline, "must be after started_at"))
	}
	return errs
}

// ReplicasFor is the one sizing rule of Pace: the fewest replicas that do
// work when each does perReplica of it (⌈work/perReplica⌉, float noise
// below 10⁻⁹ ignored); 0 when there is no work or no capacity to size by.
// The processor's replicas_needed, Forecast, the deadline controller and the
// simulator's oracle all size by it.
func ReplicasFor(work, perReplica float64) int {
	if work <= 0 || perReplica <= 0 {
		return 0
	}
	return int(math.Ceil(work/perReplica - 1e-9))
}

// Progress is the processor's view of a job, on pace.metrics.<job>.progress.
// Error = JobProgress - TimeProgress: negative means late (Asperathos' sign).
// Every field's formula is in docs/monitoring.md.
type Progress struct {
	Job   string    `json:"job"`
	At    time.Time `json:"at"`
	Mode  JobMode   `json:"mode,omitempty"`
	State JobState  `json:"state,omitempty"`
	// JobProgress is finished (done + dead) items / total, in [0, 1].
	JobProgress float64 `json:"job_progress"`
	// TimeProgress is elapsed / expected time; above 1 after the deadline.
	TimeProgress float64 `json:"time_progress"`
	// Error is JobProgress - TimeProgress for jobs with a deadline, and
	// OutputRate - InputRate (items/s) for streaming jobs.
	Error    float64 `json:"error"`
	Replicas int     `json:"replicas"`
	Total    int     `json:"total,omitempty"`
	Done     int     `json:"done"`
	// Throughput is finished items per second over the smoothing window;
	// PerReplica divides it by Replicas.
	Throughput float64 `json:"throughput"`
	PerReplica float64 `json:"per_replica"`
	// ETA is the estimated time left at Throughput; absent when unknown.
	ETA *Duration `json:"eta,omitempty"`
	// ReplicasNeeded is how many replicas at PerReplica finish the rest by
	// the deadline; 0 when unknown (no rate yet, no deadline, or past it).
	ReplicasNeeded int `json:"replicas_needed,omitempty"`
	QueueLength    int `json:"queue_length"`
	InFlight       int `json:"in_flight"`
	Redeliveries   int `json:"redeliveries"`
	Dead           int `json:"dead"`
	// Unqueued is the sample's: results waiting to be set aside.
	Unqueued int `json:"unqueued,omitempty"`
	// Streaming jobs: items/s in and out, and the backlog (queued + in flight).
	InputRate  float64 `json:"input_rate,omitempty"`
	OutputRate float64 `json:"output_rate,omitempty"`
	Backlog    int     `json:"backlog,omitempty"`
	// Lag is how long the oldest unfinished item has waited.
	Lag Duration `json:"lag,omitempty"`
	// Jobs with a cost: the workers' usage, the cost rate it comes to
	// (price units per hour), the desired rate, and what the job spent so
	// far. With a desired rate, Error is CostRate - DesiredCost.
	CPUCores    float64  `json:"cpu_cores,omitempty"`
	MemoryBytes int64    `json:"memory_bytes,omitempty"`
	CostRate    float64  `json:"cost_rate,omitempty"`
	DesiredCost *float64 `json:"desired_cost,omitempty"`
	Spent       float64  `json:"spent,omitempty"`
}

// Schema implements Message.
func (*Progress) Schema() (string, int) { return "progress", 1 }

// Validate implements Message.
func (p *Progress) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), p.Job)
	if p.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"replicas", p.Replicas}, {"replicas_needed", p.ReplicasNeeded}, {"total", p.Total}, {"done", p.Done},
		{"queue_length", p.QueueLength}, {"in_flight", p.InFlight}, {"redeliveries", p.Redeliveries},
		{"dead", p.Dead}, {"backlog", p.Backlog}} {
		errs = nonNegative(errs, field.NewPath(c.name), c.v)
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"job_progress", p.JobProgress}, {"time_progress", p.TimeProgress}, {"error", p.Error},
		{"throughput", p.Throughput}, {"per_replica", p.PerReplica}, {"input_rate", p.InputRate}, {"output_rate", p.OutputRate}} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			errs = append(errs, field.Invalid(field.NewPath(c.name), c.v, "must be a finite number"))
		}
	}
	if p.State != "" {
		errs = validateState(errs, field.NewPath("state"), p.State)
	}
	if p.ETA != nil {
		errs = nonNegativeDuration(errs, field.NewPath("eta"), *p.ETA)
	}
	return nonNegativeDuration(errs, field.NewPath("lag"), p.Lag)
}

func nonNegativeDuration(errs field.ErrorList, p *field.Path, d Duration) field.ErrorList {
	if d < 0 {
		errs = append(errs, field.Invalid(p, d.D().String(), "must not be negative"))
	}
	return errs
}

func nonNegative(errs field.ErrorList, p *field.Path, v int) field.ErrorList {
	if v < 0 {
		errs = append(errs, field.Invalid(p, v, "must be >= 0"))
	}
	return errs
}
