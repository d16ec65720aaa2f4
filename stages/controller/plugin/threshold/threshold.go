package threshold

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Name is the plugin's registry name (Asperathos' schedule_strategy).
const Name = "default"

// Config holds Asperathos' control parameters for the default scheduler.
type Config struct {
	// TriggerUp is the |error| at or above which a late job scales up.
	TriggerUp float64 `json:"trigger_up"`
	// TriggerDown is the error at or above which an early job scales down.
	TriggerDown float64 `json:"trigger_down"`
	// ActuationSize is the step added or removed per decision; 0 means 1.
	ActuationSize int `json:"actuation_size,omitempty"`
	// MinRep and MaxRep bound the replicas; 0 means the job's min and max.
	MinRep int `json:"min_rep,omitempty"`
	MaxRep int `json:"max_rep,omitempty"`
}

// Defaults fills unset fields from job.
func (c *Config) Defaults(job plugin.Job) {
	if c.ActuationSize == 0 {
		c.ActuationSize = 1
	}
	if c.MinRep == 0 {
		c.MinRep = max(job.Min, 1)
	}
	if c.MaxRep == 0 {
		c.MaxRep = job.Max
	}
}

// Validate checks the parameters with Asperathos' rules.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.TriggerUp < 0 {
		errs = append(errs, field.Invalid(field.NewPath("trigger_up"), c.TriggerUp, "must be >= 0"))
	}
	if c.TriggerDown < 0 {
		errs = append(errs, field.Invalid(field.NewPath("trigger_down"), c.TriggerDown, "must be >= 0"))
	}
	if c.ActuationSize < 1 {
		errs = append(errs, field.Invalid(field.NewPath("actuation_size"), c.ActuationSize, "must be >= 1"))
	}
	if c.MinRep < 1 {
		errs = append(errs, field.Invalid(field.NewPath("min_rep"), c.MinRep, `Variable "min_rep" must be greater than 0`))
	}
	if c.MaxRep < c.MinRep {
		errs = append(errs, field.Invalid(field.NewPath("max_rep"), c.MaxRep, `Variable "max_rep" must be greater or equal than "min_rep"`))
	}
	return errs
}

// State is what the controller remembers between samples.
type State struct {
	// LastAt is the time of the last sample acted on.
	LastAt time.Time `json:"last_at,omitzero"`
	// Replicas is the parallelism last asked for; 0 before any (then the
	// observed count is used).
	Replicas int `json:"replicas,omitempty"`
}

// Controller is the threshold scheduler of one job.
type Controller struct {
	job   string
	cfg   Config
	state State
}

var _ plugin.Controller = (*Controller)(nil)

// New builds a threshold controller; params is a JSON Config.
func New(job plugin.Job, params json.RawMessage) (plugin.Controller, error) {
	var cfg Config
	if err := plugin.Decode(params, &cfg); err != nil {
		return nil, err
	}
	cfg.Defaults(job)
	if err := plugin.Invalid(cfg.Validate()); err != nil {
		return nil, err
	}
	return &Controller{job: job.Name, cfg: cfg, state: State{Replicas: job.Initial}}, nil
}

// Scale is Asperathos' scheduler.scale(r, e): the new replica count and
// whether to act.
func (c Config) Scale(r int, e float64) (int, bool) {
	switch {
	case e > 0 && e >= c.TriggerDown:
		return max(r-c.ActuationSize, c.MinRep), true
	case e < 0 && -e >= c.TriggerUp:
		return min(r+c.ActuationSize, c.MaxRep), true
	}
	return r, false
}

// Decide implements plugin.Controller.
func (c *Controller) Decide(p schemas.Progress) (schemas.Decision, error) {
	if !plugin.Fresh(p, c.state.LastAt) {
		return schemas.Decision{}, plugin.ErrStale
	}
	r := c.state.Replicas
	if r == 0 {
		r = p.Replicas
	}
	e := p.Error
	n, act := c.cfg.Scale(r, e)
	var reason string
	switch {
	case !act:
		reason = fmt.Sprintf("error %.4g within triggers (up %g, down %g): no action", e, c.cfg.TriggerUp, c.cfg.TriggerDown)
	case e < 0:
		reason = fmt.Sprintf("late: error %.4g, |error| >= trigger_up %g: %d + %d capped at max_rep %d", e, c.cfg.TriggerUp, r, c.cfg.ActuationSize, c.cfg.MaxRep)
	default:
		reason = fmt.Sprintf("early: error %.4g >= trigger_down %g: %d - %d floored at min_rep %d", e, c.cfg.TriggerDown, r, c.cfg.ActuationSize, c.cfg.MinRep)
	}
	c.state.LastAt = p.At
	if act {
		c.state.Replicas = n
	}
	return schemas.Decision{
		Job: c.job, At: p.At, Replicas: n, Current: r, Controller: Name, Reason: reason,
		Inputs: map[string]float64{"error": e},
	}, nil
}

// State implements plugin.Controller.
func (c *Controller) State() (json.RawMessage, error) { return json.Marshal(c.state) }

// Restore implements plugin.Controller.
func (c *Controller) Restore(state json.RawMessage) error {
	var s State
	if err := json.Unmarshal(state, &s); err != nil {
		return fmt.Errorf("restore threshold state: %w", err)
	}
	c.state = s
	return nil
}
