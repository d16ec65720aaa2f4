package schemas

import (
	"encoding/json"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// JobKind tells how a job's work arrives.
type JobKind string

// Job kinds.
const (
	// Batch jobs receive their whole workload at submission and have a deadline.
	Batch JobKind = "batch"
	// Streaming jobs receive items until they are stopped.
	Streaming JobKind = "streaming"
)

// JobState is where a job is in its lifecycle.
type JobState string

// Job states. Completed, Stopped and Failed are final.
const (
	Submitted JobState = "submitted"
	Running   JobState = "running"
	Completed JobState = "completed"
	Stopped   JobState = "stopped"
	Failed    JobState = "failed"
)

// Final reports whether no further transition can leave s.
func (s JobState) Final() bool { return s == Completed || s == Stopped || s == Failed }

// Defaults for JobSpec fields left empty.
const (
	DefaultItemTimeout   = 30 * time.Second
	DefaultMaxDeliveries = 5
)

// JobSpec is what a user submits.
type JobSpec struct {
	// Name is a human-readable label; the job id is assigned by Pace.
	Name string `json:"name,omitempty"`
	// Owner is the submitting user; it becomes the APF flow of the job's requests.
	Owner string `json:"owner,omitempty"`
	// Namespace is the Kubernetes namespace the job's workers run in.
	Namespace string `json:"namespace,omitempty"`
	// Kind is batch (workload given up front) or streaming.
	Kind JobKind `json:"kind"`
	// Deadline is how long the job may take from its start; required for batch jobs.
	Deadline Duration `json:"deadline,omitempty"`
	// ItemTimeout is the lease of one item: a worker holding it longer without
	// extending the lease loses it to another worker. Default 30s.
	ItemTimeout Duration `json:"item_timeout,omitempty"`
	// MaxDeliveries is how many times an item is tried before it is dead-lettered. Default 5.
	MaxDeliveries int `json:"max_deliveries,omitempty"`
	// Items is an inline batch workload, one item per entry.
	Items []string `json:"items,omitempty"`
	// WorkloadURL is a batch workload to fetch at submission, one item per line.
	WorkloadURL string `json:"workload_url,omitempty"`
	// Image is the worker container image (Kubernetes actuator).
	Image string `json:"image,omitempty"`
	// Command runs once per item (local actuator) or as the worker (Kubernetes).
	Command []string `json:"command,omitempty"`
	// Env is extra environment for the workers.
	Env map[string]string `json:"env,omitempty"`
	// Controller selects and configures the scaling controller.
	Controller ControllerSpec `json:"controller,omitzero"`
}

// ControllerSpec selects a scaling controller plugin and its bounds.
type ControllerSpec struct {
	// Name of the controller plugin; empty selects the default.
	Name string `json:"name,omitempty"`
	// MinReplicas and MaxReplicas bound the worker count.
	MinReplicas int `json:"min_replicas,omitempty"`
	MaxReplicas int `json:"max_replicas,omitempty"`
	// CheckInterval is the minimum time between two decisions.
	CheckInterval Duration `json:"check_interval,omitempty"`
	// Params are plugin-specific settings.
	Params json.RawMessage `json:"params,omitempty"`
}

// Schema implements Message.
func (*JobSpec) Schema() (string, int) { return "job_spec", 1 }

// WithDefaults returns s with every empty defaulted field filled in.
func (s JobSpec) WithDefaults() JobSpec {
	if s.Kind == "" {
		s.Kind = Streaming
		if len(s.Items) > 0 || s.WorkloadURL != "" {
			s.Kind = Batch
		}
	}
	if s.ItemTimeout == 0 {
		s.ItemTimeout = Duration(DefaultItemTimeout)
	}
	if s.MaxDeliveries == 0 {
		s.MaxDeliveries = DefaultMaxDeliveries
	}
	return s
}

// Validate implements Message. Call it on a defaulted spec.
func (s *JobSpec) Validate() field.ErrorList {
	return s.validate(field.NewPath("spec"))
}

func (s *JobSpec) validate(p *field.Path) (errs field.ErrorList) {
	switch s.Kind {
	case Batch:
		if len(s.Items) == 0 && s.WorkloadURL == "" {
			errs = append(errs, field.Required(p.Child("items"), "a batch job needs items or workload_url"))
		}
		if s.Deadline <= 0 {
			errs = append(errs, field.Invalid(p.Child("deadline"), s.Deadline.D().String(), "must be > 0 for a batch job"))
		}
	case Streaming:
		if len(s.Items) > 0 || s.WorkloadURL != "" {
			errs = append(errs, field.Forbidden(p.Child("items"), "a streaming job receives items after submission"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []JobKind{Batch, Streaming}))
	}
	if s.Deadline < 0 {
		errs = append(errs, field.Invalid(p.Child("deadline"), s.Deadline.D().String(), "must not be negative"))
	}
	if s.ItemTimeout < Duration(time.Second) {
		errs = append(errs, field.Invalid(p.Child("item_timeout"), s.ItemTimeout.D().String(), "must be at least 1s"))
	}
	if s.MaxDeliveries < 1 {
		errs = append(errs, field.Invalid(p.Child("max_deliveries"), s.MaxDeliveries, "must be >= 1"))
	}
	if len(s.Items) > 0 && s.WorkloadURL != "" {
		errs = append(errs, field.Forbidden(p.Child("workload_url"), "give either items or workload_url"))
	}
	if s.WorkloadURL != "" {
		if u, err := url.Parse(s.WorkloadURL); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file") {
			errs = append(errs, field.Invalid(p.Child("workload_url"), s.WorkloadURL, "must be an http, https or file URL"))
		}
	}
	c, cp := s.Controller, p.Child("controller")
	if c.MinReplicas < 0 {
		errs = append(errs, field.Invalid(cp.Child("min_replicas"), c.MinReplicas, "must be >= 0"))
	}
	if c.MaxReplicas < 0 || (c.MaxReplicas > 0 && c.MaxReplicas < c.MinReplicas) {
		errs = append(errs, field.Invalid(cp.Child("max_replicas"), c.MaxReplicas, "must be >= min_replicas"))
	}
	if c.CheckInterval < 0 {
		errs = append(errs, field.Invalid(cp.Child("check_interval"), c.CheckInterval.D().String(), "must not be negative"))
	}
	if len(c.Params) > 0 && !json.Valid(c.Params) {
		errs = append(errs, field.Invalid(cp.Child("params"), string(c.Params), "must be valid JSON"))
	}
	return errs
}

// JobRecord is the current state of a job, kept in the jobs key-value bucket.
type JobRecord struct {
	ID    string   `json:"id"`
	Spec  JobSpec  `json:"spec"`
	State JobState `json:"state"`
	// Total is the number of items of a batch job (0 for streaming jobs).
	Total int `json:"total,omitempty"`
	// Reason explains the last state change.
	Reason     string    `json:"reason,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Schema implements Message.
func (*JobRecord) Schema() (string, int) { return "job_record", 1 }

// Validate implements Message.
func (r *JobRecord) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("id"), r.ID)
	errs = append(errs, r.Spec.validate(field.NewPath("spec"))...)
	errs = validateState(errs, field.NewPath("state"), r.State)
	if r.Total < 0 {
		errs = append(errs, field.Invalid(field.NewPath("total"), r.Total, "must be >= 0"))
	}
	if r.CreatedAt.IsZero() {
		errs = append(errs, field.Required(field.NewPath("created_at"), ""))
	}
	return errs
}

func validateState(errs field.ErrorList, p *field.Path, s JobState) field.ErrorList {
	switch s {
	case Submitted, Running, Completed, Stopped, Failed:
		return errs
	}
	return append(errs, field.NotSupported(p, s, []JobState{Submitted, Running, Completed, Stopped, Failed}))
}

// JobEventType names a lifecycle event; it is the last token of its subject.
type JobEventType string

// Job lifecycle events.
const (
	EventSubmitted JobEventType = "submitted"
	EventStarted   JobEventType = "started"
	EventScaled    JobEventType = "scaled"
	EventCompleted JobEventType = "completed"
	EventStopped   JobEventType = "stopped"
	EventFailed    JobEventType = "failed"
)

// JobEvent is published on every job lifecycle transition.
type JobEvent struct {
	Job  string       `json:"job"`
	Type JobEventType `json:"type"`
	At   time.Time    `json:"at"`
	// State is the job's state after the event.
	State JobState `json:"state"`
	// Replicas is set on scaled events.
	Replicas int    `json:"replicas,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Schema implements Message.
func (*JobEvent) Schema() (string, int) { return "job_event", 1 }

// Validate implements Message.
func (e *JobEvent) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), e.Job)
	switch e.Type {
	case EventSubmitted, EventStarted, EventScaled, EventCompleted, EventStopped, EventFailed:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type,
			[]JobEventType{EventSubmitted, EventStarted, EventScaled, EventCompleted, EventStopped, EventFailed}))
	}
	errs = validateState(errs, field.NewPath("state"), e.State)
	if e.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	if e.Replicas < 0 {
		errs = append(errs, field.Invalid(field.NewPath("replicas"), e.Replicas, "must be >= 0"))
	}
	return errs
}
