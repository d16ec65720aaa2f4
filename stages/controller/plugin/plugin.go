// Package plugin defines what a controller strategy implements and how the
// built-in ones are looked up by name.
//
// A controller is pure computation: it receives a job's progress messages in
// time order (time arrives in Progress.At, never from a clock), returns one
// decision per fresh message, and keeps everything it remembers in a state
// that serializes to JSON, so that the controller stage can store it in a KV
// bucket and a restarted controller resumes where it stopped.
package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
)

// ErrStale is returned by Controller.Decide for a progress message not newer
// than the last one acted on (Asperathos' "could not acquire more recent
// metrics"): no decision is taken and the state is unchanged.
var ErrStale = errors.New("progress not newer than the last one acted on")

// ErrInvalidConfig wraps the field errors of a plugin's parameters; returned
// by Registry.New and by each plugin's New.
var ErrInvalidConfig = errors.New("invalid controller parameters")

// Controller turns a job's progress into a decision. No I/O; time arrives in
// p.At. A Controller is not safe for concurrent use: the stage keeps one per job.
type Controller interface {
	// Decide returns the decision for p, or ErrStale for a stale p.
	Decide(p schemas.Progress) (schemas.Decision, error)
	// State returns the controller's memory as JSON.
	State() (json.RawMessage, error)
	// Restore replaces the controller's memory with one returned by State.
	Restore(state json.RawMessage) error
}

// Job is what a controller knows of its job besides its parameters.
type Job struct {
	// Name is the job's name, copied into decisions.
	Name string
	// Expected is the time from the job's start to its deadline; zero for a
	// job without a deadline (streaming).
	Expected time.Duration
	// Min, Max and Initial bound the worker count (the job spec's replicas).
	Min, Max, Initial int
	// ItemTime and Startup are the admission's forecast of one item's time
	// and of a worker's start-up (schemas.Prediction); Basis says where they
	// come from (schemas.BasisHint or BasisHistory). Zero: no forecast.
	ItemTime, Startup time.Duration
	Basis             string
	// Samples is how many items of earlier jobs a history forecast rests on
	// (schemas.Prediction.Samples); 0 for a hint.
	Samples int
}

// Validate checks the replica bounds.
func (j Job) Validate() field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("replicas")
	if j.Min < 0 {
		errs = append(errs, field.Invalid(p.Child("min"), j.Min, "must be >= 0"))
	}
	if j.Max < 1 || j.Max < j.Min {
		errs = append(errs, field.Invalid(p.Child("max"), j.Max, "must be >= 1 and >= min"))
	}
	if j.Expected < 0 {
		errs = append(errs, field.Invalid(field.NewPath("deadline"), j.Expected.String(), "must not be negative"))
	}
	return errs
}

// Clamp returns n bounded by [j.Min, j.Max].
func (j Job) Clamp(n int) int { return min(max(n, j.Min), j.Max) }

// ClampWhy is Clamp and, for the decision's reason, how the bounds changed n
// from the current count r (see Bounded), e.g. "limited by replicas.max (4)".
func (j Job) ClampWhy(n, r int) (int, string) {
	got := j.Clamp(n)
	return got, Bounded(n, got, r, fmt.Sprintf("replicas.min (%d)", j.Min), fmt.Sprintf("replicas.max (%d)", j.Max))
}

// Bounded says, for a decision's reason, how a bound turned the count a
// plugin wanted into the one it got, r being the current count: "" when it
// did not, "limited by <hi>" when capped, "hold at <lo>" when raised to the
// current count, else "raised to <lo>". A reason built with it never calls a
// decision that keeps the count a scale-down.
func Bounded(want, got, r int, lo, hi string) string {
	switch {
	case got == want:
		return ""
	case got < want:
		return "limited by " + hi
	case got == r:
		return "hold at " + lo
	}
	return "raised to " + lo
}

// Factory builds a controller for job from its JSON parameters (nil or empty
// means all defaults). Errors wrap ErrInvalidConfig.
type Factory func(job Job, params json.RawMessage) (Controller, error)

// Registry maps plugin names to factories. The built-in registry is a map
// literal in package builtin; tests build their own.
type Registry map[string]Factory

// Names returns the registered names, sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New builds the controller called name. An unknown name is a field error
// listing the known ones.
func (r Registry) New(name string, job Job, params json.RawMessage) (Controller, error) {
	f, ok := r[name]
	if !ok {
		err := field.NotSupported(field.NewPath("controller", "name"), name, r.Names())
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return f(job, params)
}

// Bounds are the replica bounds an Asperathos plugin takes in its own
// parameters, min_rep and max_rep; zero means the job's.
type Bounds struct {
	MinRep int `json:"min_rep,omitempty"`
	MaxRep int `json:"max_rep,omitempty"`
}

// Defaults fills unset bounds from the job's (min_rep at least 1).
func (b *Bounds) Defaults(job Job) {
	if b.MinRep == 0 {
		b.MinRep = max(job.Min, 1)
	}
	if b.MaxRep == 0 {
		b.MaxRep = job.Max
	}
}

// Validate checks the bounds with Asperathos' rules and messages.
func (b Bounds) Validate() field.ErrorList {
	var errs field.ErrorList
	if b.MinRep < 1 {
		errs = append(errs, field.Invalid(field.NewPath("min_rep"), b.MinRep, `Variable "min_rep" must be greater than 0`))
	}
	if b.MaxRep < b.MinRep {
		errs = append(errs, field.Invalid(field.NewPath("max_rep"), b.MaxRep, `Variable "max_rep" must be greater or equal than "min_rep"`))
	}
	return errs
}

// Clamp returns n bounded by [MinRep, MaxRep].
func (b Bounds) Clamp(n int) int { return min(max(n, b.MinRep), b.MaxRep) }

// Why says how the bounds turned want into got from the current count r,
// e.g. "limited by max_rep (4)"; see Bounded.
func (b Bounds) Why(want, got, r int) string {
	return Bounded(want, got, r, fmt.Sprintf("min_rep (%d)", b.MinRep), fmt.Sprintf("max_rep (%d)", b.MaxRep))
}

// Current is the replica count a decision on p starts from: asked, the count
// the controller last asked for, or before its first decision (0) the live
// count of p.
func Current(asked int, p schemas.Progress) int {
	if asked == 0 {
		return p.Replicas
	}
	return asked
}

// Decode reads params strictly (unknown fields are errors) into cfg.
func Decode(params json.RawMessage, cfg any) error {
	if len(strings.TrimSpace(string(params))) == 0 || string(params) == "null" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(params)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Invalid turns a non-empty field.ErrorList into an error wrapping ErrInvalidConfig.
func Invalid(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errs.ToAggregate())
}

// Fresh reports whether p is newer than the last message acted on, last
// (Asperathos acts only when timestamp > last_acted_timestamp).
func Fresh(p schemas.Progress, last time.Time) bool { return p.At.After(last) }

// Remaining is the number of unfinished items of a batch job: total − done − dead.
func Remaining(p schemas.Progress) int { return max(0, p.Total-p.Done-p.Dead) }

// TimeLeft is the time to the deadline derived from the time progress:
// expected × (1 − time_progress); negative after the deadline.
func TimeLeft(p schemas.Progress, expected time.Duration) time.Duration {
	return time.Duration(float64(expected) * (1 - p.TimeProgress))
}
