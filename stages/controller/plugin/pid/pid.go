package pid

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Name is the plugin's registry name.
const Name = schemas.PIDController

// Gains are Asperathos' heuristic_options.
type Gains struct {
	Proportional float64 `json:"proportional_gain"`
	Integral     float64 `json:"integral_gain"`
	Derivative   float64 `json:"derivative_gain"`
}

// Config holds the pid scheduler's parameters.
type Config struct {
	HeuristicOptions Gains `json:"heuristic_options"`
	plugin.Bounds
}

// Defaults fills unset bounds from job.
func (c *Config) Defaults(job plugin.Job) { c.Bounds.Defaults(job) }

// Validate checks the parameters.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	h := field.NewPath("heuristic_options")
	for _, g := range []struct {
		name string
		v    float64
	}{{"proportional_gain", c.HeuristicOptions.Proportional}, {"integral_gain", c.HeuristicOptions.Integral}, {"derivative_gain", c.HeuristicOptions.Derivative}} {
		if math.IsNaN(g.v) || math.IsInf(g.v, 0) {
			errs = append(errs, field.Invalid(h.Child(g.name), g.v, "must be a finite number"))
		}
	}
	return append(errs, c.Bounds.Validate()...)
}

// State is what the controller remembers between samples.
type State struct {
	LastAt time.Time `json:"last_at,omitzero"`
	// LastError is the previous sample's error; nil before the first.
	LastError *float64 `json:"last_error,omitempty"`
	Integral  float64  `json:"integral"`
	// Replicas is the parallelism last asked for; 0 before any.
	Replicas int `json:"replicas,omitempty"`
}

// Controller is the pid scheduler of one job.
type Controller struct{ plugin.Base[Config, State] }

// New builds a pid controller; params is a JSON Config.
func New(job plugin.Job, params json.RawMessage) (plugin.Controller, error) {
	b, err := plugin.NewBase[Config](Name, job, params, State{Replicas: job.Initial})
	if err != nil {
		return nil, err
	}
	return &Controller{b}, nil
}

// Decide implements plugin.Controller.
func (c *Controller) Decide(p schemas.Progress) (schemas.Decision, error) {
	s := &c.Mem
	if !plugin.Fresh(p, s.LastAt) {
		return schemas.Decision{}, plugin.ErrStale
	}
	r := plugin.Current(s.Replicas, p)
	g, e := c.Cfg.HeuristicOptions, p.Error
	prop := -g.Proportional * e
	der := 0.0
	if s.LastError != nil {
		der = -g.Derivative * (e - *s.LastError)
	}
	s.Integral += e
	integ := -g.Integral * s.Integral
	action := int(math.Trunc(prop + der + integ))
	n := c.Cfg.Clamp(r + action)
	reason := fmt.Sprintf("error %.4g: P %.4g + I %.4g + D %.4g = %.4g, truncated to %+d: %d", e, prop, integ, der, prop+integ+der, action, r+action)
	if why := c.Cfg.Why(r+action, n, r); why != "" {
		reason += fmt.Sprintf(", %s: %d", why, n)
	}
	s.LastError = &e
	s.LastAt = p.At
	s.Replicas = n
	return schemas.Decision{
		Job: c.Job.Name, At: p.At, Replicas: n, Current: r, Controller: Name,
		Reason: reason,
		Inputs: map[string]float64{"error": e, "p": prop, "i": integ, "d": der, "integral": s.Integral},
	}, nil
}
