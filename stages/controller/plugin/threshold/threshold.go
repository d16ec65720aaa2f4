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
const Name = schemas.ThresholdController

// Config holds Asperathos' control parameters for the default scheduler.
type Config struct {
	// TriggerUp is the |error| at or above which a late job scales up.
	TriggerUp float64 `json:"trigger_up"`
	// TriggerDown is the error at or above which an early job scales down.
	TriggerDown float64 `json:"trigger_down"`
	// ActuationSize is the step added or removed per decision; 0 means 1.
	ActuationSize int `json:"actuation_size,omitempty"`
	plugin.Bounds
}

// Defaults fills unset fields, the bounds from job.
func (c *Config) Defaults(job plugin.Job) {
	if c.ActuationSize == 0 {
		c.ActuationSize = 1
	}
	c.Bounds.Defaults(job)
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
	return append(errs, c.Bounds.Validate()...)
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
type Controller struct{ plugin.Base[Config, State] }

// New builds a threshold controller; params is a JSON Config.
func New(job plugin.Job, params json.RawMessage) (plugin.Controller, error) {
	b, err := plugin.NewBase[Config](Name, job, params, State{Replicas: job.Initial})
	if err != nil {
		return nil, err
	}
	return &Controller{b}, nil
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
	if !plugin.Fresh(p, c.Mem.LastAt) {
		return schemas.Decision{}, plugin.ErrStale
	}
	r := plugin.Current(c.Mem.Replicas, p)
	e := p.Error
	n, act := c.Cfg.Scale(r, e)
	var reason string
	switch {
	case !act:
		reason = fmt.Sprintf("error %.4g within triggers (up %g, down %g): no action", e, c.Cfg.TriggerUp, c.Cfg.TriggerDown)
	case e < 0:
		reason = fmt.Sprintf("late: error %.4g, |error| >= trigger_up %g: %d + %d", e, c.Cfg.TriggerUp, r, c.Cfg.ActuationSize)
		if why := c.Cfg.Why(r+c.Cfg.ActuationSize, n, r); why != "" {
			reason += ", " + why
		}
		reason += fmt.Sprintf(": %d", n)
	default:
		reason = fmt.Sprintf("early: error %.4g >= trigger_down %g: %d - %d", e, c.Cfg.TriggerDown, r, c.Cfg.ActuationSize)
		if why := c.Cfg.Why(r-c.Cfg.ActuationSize, n, r); why != "" {
			reason += ", " + why
		}
		reason += fmt.Sprintf(": %d", n)
	}
	c.Mem.LastAt = p.At
	if act {
		c.Mem.Replicas = n
	}
	return schemas.Decision{
		Job: c.Job.Name, At: p.At, Replicas: n, Current: r, Controller: Name, Reason: reason,
		Inputs: map[string]float64{"error": e},
	}, nil
}
