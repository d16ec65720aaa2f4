package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// JobMode tells how a job's work arrives.
type JobMode string

// Job modes.
const (
	// Batch jobs receive their whole workload at submission and have a deadline.
	Batch JobMode = "batch"
	// Streaming jobs receive items until they are stopped.
	Streaming JobMode = "streaming"
)

// JobState is where a job is in its lifecycle (Asperathos' names):
// Created → Ongoing → Completed | Failed | Stopped | Terminated | Error.
type JobState string

// Job states. Every state but Created and Ongoing is final.
const (
	// Created: accepted, its workload being queued.
	Created JobState = "created"
	// Ongoing: its items are being processed.
	Ongoing JobState = "ongoing"
	// Completed: every item has a result.
	Completed JobState = "completed"
	// Failed: every item has a result or a dead letter, and some are dead.
	Failed JobState = "failed"
	// Stopped: stopped by request; items in flight finished, the rest were dropped.
	Stopped JobState = "stopped"
	// Terminated: stopped at once by request; its workers are deleted.
	Terminated JobState = "terminated"
	// Error: Pace could not run the job (e.g. its workload could not be queued).
	Error JobState = "error"
)

// JobStates lists every state, in lifecycle order.
var JobStates = []JobState{Created, Ongoing, Completed, Failed, Stopped, Terminated, Error}

// Final reports whether no further transition can leave s.
func (s JobState) Final() bool { return s != Created && s != Ongoing }

// Defaults for JobSpec fields left empty.
const (
	DefaultItemTimeout   = 30 * time.Second
	DefaultMaxDeliveries = 5
)

// MaxInterval bounds item_timeout, controller.check_interval and
// worker.termination_grace: a day is already no lease, no control and no
// grace at all, so a longer one is refused as a mistake (a unit slip)
// rather than obeyed. A deadline and resources_lifetime are bounded only by
// the range of a duration (292 years): 10⁹ seconds is how Asperathos users
// write "no deadline".
const MaxInterval = 24 * time.Hour

// Actuator names a JobSpec may select.
const (
	LocalActuator      = "local"
	KubernetesActuator = "kubernetes"
)

// Controller names a JobSpec may select for the plugins compiled into Pace
// (the controller stage's registry holds exactly these); a name registered
// at run time selects an external controller.
const (
	ThresholdController = "default" // Asperathos's "default": scale by the error's sign
	PIDController       = "pid"     // Asperathos's "pid"
	DeadlineController  = "deadline"
	HPAController       = "hpa" // KEDA/HPA-style baseline
	// DefaultController scales a native job spec that names none.
	DefaultController = DeadlineController
)

// BuiltinControllers are the controller names compiled into Pace, sorted.
func BuiltinControllers() []string {
	return []string{DeadlineController, ThresholdController, HPAController, PIDController}
}

// JobSpec is what a user submits: Pace's native job specification.
type JobSpec struct {
	// Name is a human-readable label; the job id is assigned by Pace.
	Name string `json:"name,omitempty"`
	// Owner is the submitting user; Pace sets it from the caller's identity.
	Owner string `json:"owner,omitempty"`
	// Labels are free-form key/value pairs.
	Labels map[string]string `json:"labels,omitempty"`
	// Mode is batch (workload given up front) or streaming.
	Mode JobMode `json:"mode"`
	// Deadline is when a batch job should be done: a duration from its
	// start or an RFC 3339 time. Required for batch jobs.
	Deadline Deadline `json:"deadline,omitzero"`
	// DeadlinePolicy says what to do with a batch job predicted to miss its
	// deadline at admission: DeadlineWarn (the default: accept it and say
	// so in its log) or DeadlineReject (refuse it, 422 DeadlineInfeasible).
	DeadlinePolicy string `json:"deadline_policy,omitempty" jsonschema:"enum=warn,enum=reject"`
	// ItemTimeout is the lease of one item: a worker holding it longer without
	// extending the lease loses it to another worker. Default 30s.
	ItemTimeout Duration `json:"item_timeout,omitempty"`
	// MaxDeliveries is how many times an item is tried before it is dead-lettered. Default 5.
	MaxDeliveries int `json:"max_deliveries,omitempty"`
	// Workload is where a batch job's items come from.
	Workload Workload `json:"workload,omitzero"`
	// Worker is what processes the items.
	Worker WorkerSpec `json:"worker,omitzero"`
	// Replicas bounds the number of workers.
	Replicas Replicas `json:"replicas,omitzero"`
	// Controller selects and configures the scaling controller.
	Controller ControllerSpec `json:"controller,omitzero"`
	// Actuator selects where the workers run.
	Actuator ActuatorSpec `json:"actuator,omitzero"`
	// Failure says when the job is failed rather than left to run.
	Failure FailurePolicy `json:"failure,omitzero"`
	// Cost prices the workers' resources; with a desired cost, the job is
	// controlled by what it spends rather than by its progress.
	Cost *CostSpec `json:"cost,omitempty"`
	// ResourcesLifetime is how long a finished job's resources (queue,
	// workers, metrics) are kept before cleanup (Asperathos' job_resources_lifetime).
	ResourcesLifetime Duration `json:"resources_lifetime,omitempty"`
}

// CostSpec prices a job's workers, as Asperathos' kubejobs_cost monitor
// did: the job's cost rate is CPUPrice × the vCPUs its workers use +
// MemoryPrice × the GB of memory they hold, in price units per hour.
type CostSpec struct {
	CPUPrice    float64 `json:"cpu_price"`
	MemoryPrice float64 `json:"memory_price"`
	// Desired, when set, is the cost rate the job should spend at: the
	// controller then acts on the rate minus Desired (positive, the job
	// overspends: fewer replicas), and not on the deadline.
	Desired *float64 `json:"desired,omitempty"`
}

// Validate checks the prices and the desired rate at p.
func (c *CostSpec) Validate(p *field.Path) (errs field.ErrorList) {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"cpu_price", &c.CPUPrice}, {"memory_price", &c.MemoryPrice}, {"desired", c.Desired}} {
		if f.v != nil && (*f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			errs = append(errs, field.Invalid(p.Child(f.name), *f.v, "must be a finite number >= 0"))
		}
	}
	return errs
}

// Workload is a batch job's items: inline, a file or an http(s) URL with
// one item per line. Exactly one source is given for a batch job.
type Workload struct {
	Items []string `json:"items,omitempty"`
	File  string   `json:"file,omitempty"`
	URL   string   `json:"url,omitempty"`
	// ItemTime is how long one item takes a worker, a hint for the
	// prediction at admission (see Prediction).
	ItemTime Duration `json:"item_time,omitempty"`
}

// Deadline policies of JobSpec.DeadlinePolicy.
const (
	DeadlineWarn   = "warn"
	DeadlineReject = "reject"
)

// Prediction is the manager's forecast, at admission, of when a batch job
// with a deadline completes at replicas.max: ETA = start-up + ⌈items /
// replicas.max⌉ × item time, from the job's start. Basis says where the
// item time comes from: "hint" (workload.item_time), "history" (the item
// times of earlier jobs of the same command or image) or "none" (no
// forecast: Feasible is absent).
type Prediction struct {
	Feasible *bool    `json:"feasible,omitempty"`
	ETA      Duration `json:"eta,omitempty"`
	// ReplicasNeeded is the fewest replicas that meet the deadline; 0 when
	// none can (the start-up alone takes longer).
	ReplicasNeeded int      `json:"replicas_needed,omitempty"`
	Basis          string   `json:"basis"`
	ItemTime       Duration `json:"item_time,omitempty"`
	Startup        Duration `json:"startup,omitempty"`
	// Samples is how many items of earlier jobs the history holds.
	Samples int `json:"samples,omitempty"`
}

// Prediction bases.
const (
	BasisHint    = "hint"
	BasisHistory = "history"
	BasisNone    = "none"
)

// Forecast predicts a batch job of items on replicas workers, each taking
// itemTime per item after a start-up, against a deadline from the job's
// start: Feasible, ETA and ReplicasNeeded of a Prediction (its Basis is the
// caller's). The simulator checks it against simulated runs.
func Forecast(items, replicas int, itemTime, startup, deadline time.Duration) Prediction {
	replicas = max(1, replicas)
	rounds := (items + replicas - 1) / replicas
	eta := startup + time.Duration(rounds)*itemTime
	feasible := eta <= deadline
	p := Prediction{Feasible: &feasible, ETA: Duration(eta), ItemTime: Duration(itemTime), Startup: Duration(startup)}
	// Each replica finishes ⌊(deadline − start-up) / item time⌋ items in time.
	if perReplica := math.Floor(float64(deadline-startup) / float64(max(itemTime, time.Nanosecond))); perReplica >= 1 {
		p.ReplicasNeeded = ReplicasFor(float64(items), perReplica)
	}
	return p
}

// Empty reports whether w names no source.
func (w Workload) Empty() bool { return len(w.Items) == 0 && w.File == "" && w.URL == "" }

// IsZero reports whether w is empty, so that an empty item list is left out
// of JSON as an absent one is: the encoding of a decoded spec is a fixed point.
func (w Workload) IsZero() bool { return w.Empty() && w.ItemTime == 0 }

// WorkerSpec describes a job's workers.
type WorkerSpec struct {
	// Image and Command run as the worker pods (Kubernetes actuator).
	Image   string   `json:"image,omitempty"`
	Command []string `json:"command,omitempty"`
	// Exec is a shell command run under 'pace worker --exec': item on
	// stdin, result on stdout. The local actuator runs it on the host; the
	// Kubernetes actuator in worker.image, which must hold pace on its
	// PATH (Pace's own image does). Give Exec or Command, not both.
	Exec string `json:"exec,omitempty"`
	// ExecMode is how Exec gets the items, as 'pace worker --exec-mode':
	// ExecItem (the default: a process per item), ExecLines or ExecJSON (a
	// process per concurrency slot, fed an item per line).
	ExecMode string `json:"exec_mode,omitempty" jsonschema:"enum=item,enum=lines,enum=json"`
	// Protocol is how the workers take their items: ProtocolNATS (the
	// default: the bus, with the job's token in PACE_TOKEN) or ProtocolRedis
	// (the Redis front, with REDIS_HOST, REDIS_PORT and REDIS_QUEUE, which
	// is then their credential). Workers get the variables of their
	// protocol only. Asperathos payloads speak Redis.
	Protocol string `json:"protocol,omitempty" jsonschema:"enum=nats,enum=redis"`
	// Env is extra environment for the workers.
	Env map[string]string `json:"env,omitempty"`
	// Timeout is the longest one item may run, from 1s to 24h; zero means
	// no limit. Past it the item's handler is cancelled (an exec'd command
	// gets SIGTERM, then SIGKILL after TerminationGrace, 5 s when unset)
	// and the attempt fails with "timed out after <Timeout>", which is its
	// dead letter's error once MaxDeliveries attempts have failed.
	Timeout Duration `json:"timeout,omitempty"`
	// Resources are container limits and requests, e.g. {"cpu": "500m"}.
	Resources *Resources `json:"resources,omitempty"`
	// NodeSelector, ImagePullSecrets and TerminationGrace go to the pod spec.
	NodeSelector     map[string]string `json:"node_selector,omitempty"`
	ImagePullSecrets []string          `json:"image_pull_secrets,omitempty"`
	TerminationGrace Duration          `json:"termination_grace,omitempty"`
	// Security relaxes the restricted pod security of the workers on
	// Kubernetes for images that need it; nil keeps it.
	Security *WorkerSecurity `json:"security,omitempty"`
}

// WorkerSecurity relaxes the restricted pod security of a job's workers
// (uid 65532, read-only root filesystem, no privilege, every capability
// dropped), for images built to run otherwise, such as Asperathos'.
type WorkerSecurity struct {
	// ImageUser runs the workers as the user their image names (root if it
	// names none) instead of uid 65532.
	ImageUser bool `json:"image_user,omitempty"`
	// WritableRoot gives the workers a writable root filesystem.
	WritableRoot bool `json:"writable_root,omitempty"`
	// Privileged runs the workers privileged, with HostDevices (such as
	// /dev/isgx for SGX enclaves) mounted: only where Pace's administrator
	// allows it (pace up or pace stage manager --allow-privileged-workers).
	Privileged  bool     `json:"privileged,omitempty"`
	HostDevices []string `json:"host_devices,omitempty"`
}

// Protocols of WorkerSpec.Protocol; empty means ProtocolNATS.
const (
	ProtocolNATS  = "nats"
	ProtocolRedis = "redis"
)

// SpeaksRedis reports whether the workers take their items from the Redis
// front.
func (w WorkerSpec) SpeaksRedis() bool { return w.Protocol == ProtocolRedis }

// Exec modes of WorkerSpec.ExecMode; empty means ExecItem.
const (
	ExecItem  = "item"
	ExecLines = "lines"
	ExecJSON  = "json"
)

// IsZero reports whether w sets nothing: empty lists and maps count as
// absent, so they are left out of JSON as omitempty leaves out its fields.
func (w WorkerSpec) IsZero() bool {
	return w.Image == "" && len(w.Command) == 0 && w.Exec == "" && w.ExecMode == "" && w.Protocol == "" && len(w.Env) == 0 && w.Timeout == 0 && w.Resources == nil &&
		len(w.NodeSelector) == 0 && len(w.ImagePullSecrets) == 0 && w.TerminationGrace == 0 && w.Security == nil
}

// Runs reports whether w names workers for Pace to run (an exec command, a
// command or an image). A job without them is a queue whose workers its
// user runs (pace push, pace worker): it is never actuated.
func (w WorkerSpec) Runs() bool { return w.Exec != "" || len(w.Command) > 0 || w.Image != "" }

// Resources are Kubernetes container resources.
type Resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// Replicas bounds a job's worker count. Zero Max means Min; zero Initial means Min.
type Replicas struct {
	Min     int `json:"min,omitempty"`
	Max     int `json:"max,omitempty"`
	Initial int `json:"initial,omitempty"`
}

// ControllerSpec selects a scaling controller plugin.
type ControllerSpec struct {
	// Name of the controller plugin; empty selects the default.
	Name string `json:"name,omitempty"`
	// CheckInterval is the minimum time between two decisions.
	CheckInterval Duration `json:"check_interval,omitempty"`
	// Params are plugin-specific settings.
	Params json.RawMessage `json:"params,omitempty"`
}

// ActuatorSpec selects where a job's workers run.
type ActuatorSpec struct {
	// Name is local or kubernetes; empty selects the installation's default.
	Name string `json:"name,omitempty"`
	// Namespace is the Kubernetes namespace of the workers.
	Namespace string `json:"namespace,omitempty"`
	// Cluster names a registered cluster; empty selects the active one.
	Cluster string `json:"cluster,omitempty"`
	// Target, with the kubernetes actuator, is a workload the user already
	// runs, whose replicas Pace scales through its scale subresource: Pace
	// never creates or deletes it, and the job has no worker spec.
	Target *ScaleTarget `json:"target,omitempty"`
}

// ScaleTarget names a Deployment or StatefulSet in the job's namespace.
type ScaleTarget struct {
	Kind string `json:"kind" jsonschema:"enum=Deployment,enum=StatefulSet"`
	Name string `json:"name"`
}

// Actuated reports whether Pace scales the job's workers: it runs them
// (Worker.Runs), or scales its target. Other jobs are queues whose workers
// their users run.
func (s JobSpec) Actuated() bool { return s.Worker.Runs() || s.Actuator.Target != nil }

// Schema implements Message.
func (*JobSpec) Schema() (string, int) { return "job_spec", 2 }

// WithDefaults returns s with every empty defaulted field filled in.
func (s JobSpec) WithDefaults() JobSpec {
	if s.Mode == "" {
		s.Mode = Streaming
		if !s.Workload.Empty() {
			s.Mode = Batch
		}
	}
	if s.ItemTimeout == 0 {
		s.ItemTimeout = Duration(DefaultItemTimeout)
	}
	if s.MaxDeliveries == 0 {
		s.MaxDeliveries = DefaultMaxDeliveries
	}
	r := &s.Replicas
	if r.Min == 0 && r.Max == 0 && r.Initial == 0 {
		r.Min, r.Max, r.Initial = 1, 1, 1
	}
	if r.Max == 0 {
		r.Max = max(r.Min, r.Initial)
	}
	if r.Initial == 0 {
		r.Initial = r.Min
	}
	s.Failure = s.Failure.withDefaults(s.ItemTimeout)
	return s
}

// Validate implements Message. Call it on a defaulted spec. It checks what
// the spec alone can tell; plugin names and the deadline's distance from
// now are checked by the manager.
func (s *JobSpec) Validate() field.ErrorList {
	return s.validate(field.NewPath("spec"))
}

func (s *JobSpec) validate(p *field.Path) (errs field.ErrorList) {
	wp := p.Child("workload")
	switch s.Mode {
	case Batch:
		if s.Workload.Empty() {
			errs = append(errs, field.Required(wp, "a batch job needs workload.items, workload.file or workload.url"))
		}
		if s.Deadline.IsZero() {
			errs = append(errs, field.Required(p.Child("deadline"), "a batch job needs a deadline"))
		}
	case Streaming:
		if !s.Workload.Empty() {
			errs = append(errs, field.Forbidden(wp, "a streaming job receives items after submission"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), s.Mode, []JobMode{Batch, Streaming}))
	}
	if s.Deadline.After < 0 {
		errs = append(errs, field.Invalid(p.Child("deadline"), s.Deadline.String(), "must be positive"))
	}
	if s.ItemTimeout < Duration(time.Second) {
		errs = append(errs, field.Invalid(p.Child("item_timeout"), s.ItemTimeout.D().String(), "must be at least 1s"))
	}
	errs = atMost(errs, p.Child("item_timeout"), s.ItemTimeout, MaxInterval)
	if s.MaxDeliveries < 1 {
		errs = append(errs, field.Invalid(p.Child("max_deliveries"), s.MaxDeliveries, "must be >= 1"))
	}
	w := s.Workload
	sources := 0
	for _, set := range []bool{len(w.Items) > 0, w.File != "", w.URL != ""} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		errs = append(errs, field.Forbidden(wp, "give only one of items, file and url"))
	}
	if w.URL != "" {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(wp.Child("url"), w.URL, "must be an http or https URL"))
		}
	}
	errs = append(errs, s.Failure.validate(p.Child("failure"))...)
	r, rp := s.Replicas, p.Child("replicas")
	if r.Min < 0 {
		errs = append(errs, field.Invalid(rp.Child("min"), r.Min, "must be >= 0"))
	}
	if r.Max < 1 || r.Max < r.Min {
		errs = append(errs, field.Invalid(rp.Child("max"), r.Max, "must be >= 1 and >= min"))
	}
	if r.Initial < r.Min || r.Initial > max(r.Max, r.Min) {
		errs = append(errs, field.Invalid(rp.Child("initial"), r.Initial, "must be between min and max"))
	}
	c, cp := s.Controller, p.Child("controller")
	errs = between(errs, cp.Child("check_interval"), c.CheckInterval, MaxInterval)
	if len(c.Params) > 0 && !json.Valid(c.Params) {
		errs = append(errs, field.Invalid(cp.Child("params"), string(c.Params), "must be valid JSON"))
	}
	switch s.Actuator.Name {
	case "", LocalActuator, KubernetesActuator:
	default:
		errs = append(errs, field.NotSupported(p.Child("actuator", "name"), s.Actuator.Name, []string{LocalActuator, KubernetesActuator}))
	}
	if t := s.Actuator.Target; t != nil {
		tp := p.Child("actuator", "target")
		if s.Actuator.Name != KubernetesActuator {
			errs = append(errs, field.Forbidden(tp, "needs actuator.name kubernetes"))
		}
		if t.Kind != "Deployment" && t.Kind != "StatefulSet" {
			errs = append(errs, field.NotSupported(tp.Child("kind"), t.Kind, []string{"Deployment", "StatefulSet"}))
		}
		for _, msg := range validation.IsDNS1123Subdomain(t.Name) {
			errs = append(errs, field.Invalid(tp.Child("name"), t.Name, msg))
		}
		if s.Worker.Runs() {
			errs = append(errs, field.Forbidden(p.Child("worker"), "a target runs its own pods: give a worker spec or a target, not both"))
		}
	} else if s.Actuator.Name == KubernetesActuator && s.Worker.Image == "" {
		errs = append(errs, field.Required(p.Child("worker", "image"), "the kubernetes actuator runs an image, or scales a target"))
	}
	errs = between(errs, p.Child("worker", "termination_grace"), s.Worker.TerminationGrace, MaxInterval)
	if t := s.Worker.Timeout; t != 0 && t.D() < time.Second {
		errs = append(errs, field.Invalid(p.Child("worker", "timeout"), t.D().String(), "must be at least 1s (0: no limit)"))
	} else {
		errs = atMost(errs, p.Child("worker", "timeout"), t, MaxInterval)
	}
	errs = between(errs, p.Child("workload", "item_time"), s.Workload.ItemTime, MaxInterval)
	switch s.DeadlinePolicy {
	case "", DeadlineWarn, DeadlineReject:
	default:
		errs = append(errs, field.NotSupported(p.Child("deadline_policy"), s.DeadlinePolicy, []string{DeadlineWarn, DeadlineReject}))
	}
	if s.Worker.Exec != "" && len(s.Worker.Command) > 0 {
		errs = append(errs, field.Forbidden(p.Child("worker", "command"), "give worker.exec (run under 'pace worker') or worker.command, not both"))
	}
	switch em := s.Worker.ExecMode; {
	case em != "" && em != ExecItem && em != ExecLines && em != ExecJSON:
		errs = append(errs, field.NotSupported(p.Child("worker", "exec_mode"), em, []string{ExecItem, ExecLines, ExecJSON}))
	case em != "" && s.Worker.Exec == "":
		errs = append(errs, field.Forbidden(p.Child("worker", "exec_mode"), "applies to worker.exec only"))
	}
	switch pr := s.Worker.Protocol; {
	case pr != "" && pr != ProtocolNATS && pr != ProtocolRedis:
		errs = append(errs, field.NotSupported(p.Child("worker", "protocol"), pr, []string{ProtocolNATS, ProtocolRedis}))
	case pr == ProtocolRedis && s.Worker.Exec != "":
		errs = append(errs, field.Forbidden(p.Child("worker", "protocol"), "worker.exec runs 'pace worker', which takes its items from the bus: redis applies to worker.command"))
	}
	if sec := s.Worker.Security; sec != nil {
		sp := p.Child("worker", "security")
		for i, d := range sec.HostDevices {
			if !strings.HasPrefix(d, "/dev/") || path.Clean(d) != d {
				errs = append(errs, field.Invalid(sp.Child("host_devices").Index(i), d, "must be a device path under /dev/"))
			}
		}
		if len(sec.HostDevices) > 0 && !sec.Privileged {
			errs = append(errs, field.Forbidden(sp.Child("host_devices"), "needs privileged: true"))
		}
	}
	if s.Cost != nil {
		errs = append(errs, s.Cost.Validate(p.Child("cost"))...)
	}
	errs = nonNegativeDuration(errs, p.Child("resources_lifetime"), s.ResourcesLifetime)
	return errs
}

// between reports d at p unless 0 <= d <= limit.
func between(errs field.ErrorList, p *field.Path, d Duration, limit time.Duration) field.ErrorList {
	if d < 0 {
		return append(errs, field.Invalid(p, d.D().String(), "must not be negative"))
	}
	return atMost(errs, p, d, limit)
}

// atMost reports d at p when it exceeds limit, a whole number of hours.
func atMost(errs field.ErrorList, p *field.Path, d Duration, limit time.Duration) field.ErrorList {
	if d.D() > limit {
		return append(errs, field.Invalid(p, d.D().String(), fmt.Sprintf("must be at most %dh", limit/time.Hour)))
	}
	return errs
}

// Deadline is a duration from the job's start or an absolute time. In JSON
// it is a Go duration string, a number of seconds, or an RFC 3339 time.
type Deadline struct {
	After Duration
	At    time.Time
}

// IsZero reports whether no deadline is set.
func (d Deadline) IsZero() bool { return d.After == 0 && d.At.IsZero() }

// Time is the deadline of a job started at start; zero when none is set.
func (d Deadline) Time(start time.Time) time.Time {
	switch {
	case !d.At.IsZero():
		return d.At
	case d.After != 0:
		return start.Add(d.After.D())
	}
	return time.Time{}
}

func (d Deadline) String() string {
	if !d.At.IsZero() {
		return d.At.Format(time.RFC3339Nano) // fractions of a second too, so that it reads back the same
	}
	return d.After.D().String()
}

// MarshalJSON writes the RFC 3339 time or the duration string.
func (d Deadline) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string, a number of seconds or an RFC 3339 time.
func (d *Deadline) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			if t.IsZero() { // would read as no deadline at all
				return fmt.Errorf("invalid deadline %s: the zero time (year 1) is no deadline", b)
			}
			*d = Deadline{At: t}
			return nil
		}
	}
	if err := d.After.UnmarshalJSON(b); err != nil {
		return fmt.Errorf("invalid deadline %s: want a duration such as \"90s\", seconds, or an RFC 3339 time", b)
	}
	d.At = time.Time{}
	return nil
}

// JSONSchema describes Deadline for the generated JSON Schema documents.
func (Deadline) JSONSchema() *jsonschema.Schema {
	s := Duration(0).JSONSchema()
	s.OneOf = append(s.OneOf, &jsonschema.Schema{Type: "string", Format: "date-time", Description: "RFC 3339 time"})
	return s
}

// JobRecord is the current state of a job, kept in the jobs key-value
// bucket and materialised from its events.
type JobRecord struct {
	ID    string   `json:"id"`
	Spec  JobSpec  `json:"spec"`
	State JobState `json:"state"`
	// Format is the submitted document's format: "pace" or "asperathos".
	Format string `json:"format,omitempty"`
	// Total is the number of items of a batch job (0 for streaming jobs).
	Total int `json:"total,omitempty"`
	// Prediction is the forecast at admission (batch jobs with a deadline).
	Prediction *Prediction `json:"prediction,omitempty"`
	// Trace is the W3C traceparent of the job's submission span when
	// traces are exported: every span of the job descends from it.
	Trace string `json:"trace,omitempty"`
	// Replicas is the last known worker count.
	Replicas int `json:"replicas,omitempty"`
	// StopRequested is set by a stop: no new items, in-flight ones finish.
	StopRequested bool `json:"stop_requested,omitempty"`
	// Reason explains the last state change.
	Reason     string    `json:"reason,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// CleanedAt is when the finished job's resources were released.
	CleanedAt time.Time `json:"cleaned_at,omitzero"`
	// Seq is the stream sequence of the last event applied to the record.
	Seq uint64 `json:"seq,omitempty"`
}

// ApplyEvent returns the record after ev (stream sequence seq), or nil when
// ev changes nothing: it was applied already, or it is a state change a
// finished job refuses. Two writers (the manager and the actuator) record
// events, so one may apply an event after a later one of the other's: such
// an overtaken event (seq not above the record's) still makes its state
// change, which the lifecycle's guards keep in order, but not its replicas,
// which the later event set. It is deterministic, so replaying events
// rebuilds a record; every writer of job records applies events through it.
func ApplyEvent(cur *JobRecord, ev *JobEvent, seq uint64) *JobRecord {
	if cur == nil {
		if ev.Type != EventCreated || ev.Spec == nil {
			return nil
		}
		return &JobRecord{ID: ev.Job, Spec: *ev.Spec, State: Created, Format: ev.Format,
			Total: ev.Total, Prediction: ev.Prediction, Trace: ev.Trace, Reason: ev.Reason, CreatedAt: ev.At, Seq: seq}
	}
	overtaken := seq <= cur.Seq
	next := *cur
	next.Seq = max(cur.Seq, seq)
	switch ev.Type {
	case EventCreated, EventDeleted:
		return nil
	case EventStarted:
		if cur.State != Created {
			return nil
		}
		next.State, next.StartedAt, next.Total = Ongoing, ev.At, ev.Total
		if !overtaken {
			next.Replicas = ev.Replicas
		}
	case EventScaled:
		if overtaken {
			return nil
		}
		next.Replicas = ev.Replicas
	case EventStopping:
		if cur.State.Final() || overtaken && cur.StopRequested {
			return nil
		}
		next.StopRequested = true
		next.Reason = ev.Reason
	case EventCleaned:
		if !cur.State.Final() || overtaken && !cur.CleanedAt.IsZero() {
			return nil
		}
		next.CleanedAt = ev.At
	default: // completed, failed, stopped, terminated, error
		if cur.State.Final() {
			return nil
		}
		next.State, next.FinishedAt, next.Reason = ev.State, ev.At, ev.Reason
	}
	return &next
}

// Schema implements Message.
func (*JobRecord) Schema() (string, int) { return "job_record", 2 }

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
	for _, v := range JobStates {
		if s == v {
			return errs
		}
	}
	return append(errs, field.NotSupported(p, s, JobStates))
}

// JobEventType names a lifecycle event; it is the last token of its subject.
type JobEventType string

// Job lifecycle events.
const (
	EventCreated    JobEventType = "created"    // accepted; carries the spec
	EventStarted    JobEventType = "started"    // items queued; carries the total
	EventScaled     JobEventType = "scaled"     // replicas changed
	EventStopping   JobEventType = "stopping"   // stop requested
	EventCompleted  JobEventType = "completed"  // every item has a result
	EventFailed     JobEventType = "failed"     // every item done, some dead
	EventStopped    JobEventType = "stopped"    // stop drained
	EventTerminated JobEventType = "terminated" // terminated at once
	EventError      JobEventType = "error"      // could not run
	EventCleaned    JobEventType = "cleaned"    // resources released
	EventDeleted    JobEventType = "deleted"    // removed from the job list
)

// JobEventTypes lists every event type.
var JobEventTypes = []JobEventType{EventCreated, EventStarted, EventScaled, EventStopping, EventCompleted,
	EventFailed, EventStopped, EventTerminated, EventError, EventCleaned, EventDeleted}

// JobEvent is published on every job lifecycle transition, on
// pace.jobs.<job>.<type>. The events of a job are the source of truth its
// record is built from.
type JobEvent struct {
	Job  string       `json:"job"`
	Type JobEventType `json:"type"`
	At   time.Time    `json:"at"`
	// State is the job's state after the event.
	State JobState `json:"state"`
	// Spec is set on created events (without inline items).
	Spec *JobSpec `json:"spec,omitempty"`
	// Format is set on created events.
	Format string `json:"format,omitempty"`
	// Total is set on started events.
	Total int `json:"total,omitempty"`
	// Prediction is set on created events of batch jobs with a deadline.
	Prediction *Prediction `json:"prediction,omitempty"`
	// Trace is set on created events when traces are exported: the
	// traceparent of the job's submission span.
	Trace string `json:"trace,omitempty"`
	// Replicas is set on scaled events.
	Replicas int    `json:"replicas,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Schema implements Message.
func (*JobEvent) Schema() (string, int) { return "job_event", 2 }

// Validate implements Message.
func (e *JobEvent) Validate() field.ErrorList {
	errs := validateToken(nil, field.NewPath("job"), e.Job)
	known := false
	for _, t := range JobEventTypes {
		known = known || e.Type == t
	}
	if !known {
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type, JobEventTypes))
	}
	errs = validateState(errs, field.NewPath("state"), e.State)
	if e.At.IsZero() {
		errs = append(errs, field.Required(field.NewPath("at"), ""))
	}
	if e.Replicas < 0 {
		errs = append(errs, field.Invalid(field.NewPath("replicas"), e.Replicas, "must be >= 0"))
	}
	if e.Type == EventCreated && e.Spec == nil {
		errs = append(errs, field.Required(field.NewPath("spec"), "created events carry the spec"))
	}
	return errs
}

// Control is the request/reply subject of a job command sent to the
// manager over NATS: "stop" or "terminate" (pace.control.<action>).
func (p Prefix) Control(action string) string { return p.join("control", action) }
