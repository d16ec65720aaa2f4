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
const Name = "pid"

// Gains are Asperathos' heuristic_options.
type Gains struct {
	Proportional float64 `json:"proportional_gain"`
	Integral     float64 `json:"integral_gain"`
	Derivative   float64 `json:"derivative_gain"`
}

// Config holds the pid scheduler's parameters.
type Config struct {
	HeuristicOptions Gains `json:"heuristic_options"`
	// MinRep and MaxRep bound the replicas; 0 means the job's min and max.
	MinRep int `json:"min_rep,omitempty"`
	MaxRep int `json:"max_rep,omitempty"`
}

// Defaults fills unset bounds from job.
func (c *Config) Defaults(job plugin.Job) {
	if c.MinRep == 0 {
		c.MinRep = max(job.Min, 1)
	}
	if c.MaxRep == 0 {
		c.MaxRep = job.Max
	}
}

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
	LastAt time.Time `json:"last_at,omitzero"`
	// LastError is the previous sample's error; nil before the first.
	LastError *float64 `json:"last_error,omitempty"`
	Integral  float64  `json:"integral"`
	// Replicas is the parallelism last asked for; 0 before any.
	Replicas int `json:"replicas,omitempty"`
}

// Controller is the pid scheduler of one job.
type Controller struct {
	job   string
	cfg   Config
	state State
}

var _ plugin.Controller = (*Controller)(nil)

// New builds a pid controller; params is a JSON Config.
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

// Decide implements plugin.Controller.
func (c *Controller) Decide(p schemas.Progress) (schemas.Decision, error) {
	if !plugin.Fresh(p, c.state.LastAt) {
		return schemas.Decision{}, plugin.ErrStale
	}
	r := c.state.Replicas
	if r == 0 {
		r = p.Replicas
	}
	g, e := c.cfg.HeuristicOptions, p.Error
	prop := -g.Proportional * e
	der := 0.0
	if c.state.LastError != nil {
		der = -g.Derivative * (e - *c.state.LastError)
	}
	c.state.Integral += e
	integ := -g.Integral * c.state.Integral
	action := int(math.Trunc(prop + der + integ))
	n := min(max(r+action, c.cfg.MinRep), c.cfg.MaxRep)
	c.state.LastError = &e
	c.state.LastAt = p.At
	c.state.Replicas = n
	return schemas.Decision{
		Job: c.job, At: p.At, Replicas: n, Current: r, Controller: Name,
		Reason: fmt.Sprintf("error %.4g: P %.4g + I %.4g + D %.4g = %.4g, truncated to %+d, %d clamped to [%d, %d]",
			e, prop, integ, der, prop+integ+der, action, r+action, c.cfg.MinRep, c.cfg.MaxRep),
		Inputs: map[string]float64{"error": e, "p": prop, "i": integ, "d": der, "integral": c.state.Integral},
	}, nil
}

// State implements plugin.Controller.
func (c *Controller) State() (json.RawMessage, error) { return json.Marshal(c.state) }

// Restore implements plugin.Controller.
func (c *Controller) Restore(state json.RawMessage) error {
	var s State
	if err := json.Unmarshal(state, &s); err != nil {
		return fmt.Errorf("restore pid state: %w", err)
	}
	c.state = s
	return nil
}
