package hpa

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
const Name = schemas.HPAController

// Config holds the baseline's parameters.
type Config struct {
	// Target is the lag (items) per replica; 0 means 10, KEDA's lagThreshold default.
	Target float64 `json:"target,omitempty"`
	// Tolerance is the dead-band on the usage ratio; nil means 0.1.
	Tolerance *float64 `json:"tolerance,omitempty"`
	// ScaleUpWindow and ScaleDownWindow are the stabilization windows;
	// nil means 0 s and 300 s.
	ScaleUpWindow   *schemas.Duration `json:"scale_up_window,omitempty"`
	ScaleDownWindow *schemas.Duration `json:"scale_down_window,omitempty"`
	// Period is the rate-limit policies' period; 0 means 15 s.
	Period schemas.Duration `json:"period,omitempty"`
}

// Defaults fills unset fields with the HPA's defaults, which do not depend on the job.
func (c *Config) Defaults(plugin.Job) {
	if c.Target == 0 {
		c.Target = 10
	}
	if c.Tolerance == nil {
		t := 0.1
		c.Tolerance = &t
	}
	if c.ScaleUpWindow == nil {
		d := schemas.Duration(0)
		c.ScaleUpWindow = &d
	}
	if c.ScaleDownWindow == nil {
		d := schemas.Duration(300 * time.Second)
		c.ScaleDownWindow = &d
	}
	if c.Period == 0 {
		c.Period = schemas.Duration(15 * time.Second)
	}
}

// Validate checks the parameters; call after Defaults.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if !(c.Target > 0) || math.IsInf(c.Target, 0) {
		errs = append(errs, field.Invalid(field.NewPath("target"), c.Target, "must be a positive number"))
	}
	if *c.Tolerance < 0 || *c.Tolerance >= 1 {
		errs = append(errs, field.Invalid(field.NewPath("tolerance"), *c.Tolerance, "must be in [0, 1)"))
	}
	for _, w := range []struct {
		name string
		d    schemas.Duration
	}{{"scale_up_window", *c.ScaleUpWindow}, {"scale_down_window", *c.ScaleDownWindow}} {
		if w.d < 0 || w.d.D() > time.Hour {
			errs = append(errs, field.Invalid(field.NewPath(w.name), w.d.D().String(), "must be in [0, 1h]"))
		}
	}
	if c.Period < 0 {
		errs = append(errs, field.Invalid(field.NewPath("period"), c.Period.D().String(), "must be positive"))
	}
	return errs
}

// Point is one timed replica count.
type Point struct {
	At       time.Time `json:"at"`
	Replicas int       `json:"replicas"`
}

// State is what the baseline remembers.
type State struct {
	LastAt   time.Time `json:"last_at,omitzero"`
	Replicas int       `json:"replicas,omitempty"`
	// Recommendations within the longer window, oldest first.
	Recommendations []Point `json:"recommendations,omitempty"`
	// Changes are the replica counts decided within the last period, oldest first.
	Changes []Point `json:"changes,omitempty"`
	// Before is the count in effect before the oldest kept change.
	Before int `json:"before,omitempty"`
}

// Controller is the baseline for one job.
type Controller struct{ plugin.Base[Config, State] }

// New builds the baseline; params is a JSON Config.
func New(job plugin.Job, params json.RawMessage) (plugin.Controller, error) {
	b, err := plugin.NewBase[Config](Name, job, params, State{Replicas: job.Initial, Before: job.Initial})
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
	s.LastAt = p.At
	r := plugin.Current(s.Replicas, p)
	lag := float64(p.QueueLength + p.InFlight)
	desired := int(math.Ceil(lag/c.Cfg.Target - 1e-9))
	why := fmt.Sprintf("lag %d / target %g = %d", int(lag), c.Cfg.Target, desired)
	if r > 0 && math.Abs(lag/(c.Cfg.Target*float64(r))-1) <= *c.Cfg.Tolerance {
		desired = r
		why += fmt.Sprintf(", within tolerance %g of %d", *c.Cfg.Tolerance, r)
	}

	// Stabilization: min over the up window, max over the down window.
	s.Recommendations = append(s.Recommendations, Point{p.At, desired})
	keep := max(c.Cfg.ScaleUpWindow.D(), c.Cfg.ScaleDownWindow.D())
	for len(s.Recommendations) > 1 && p.At.Sub(s.Recommendations[0].At) > keep {
		s.Recommendations = s.Recommendations[1:]
	}
	up, down := desired, desired
	for _, rec := range s.Recommendations {
		age := p.At.Sub(rec.At)
		if age <= c.Cfg.ScaleUpWindow.D() {
			up = min(up, rec.Replicas)
		}
		if age <= c.Cfg.ScaleDownWindow.D() {
			down = max(down, rec.Replicas)
		}
	}
	n := r
	switch {
	case r < up:
		n = up
	case down < r:
		n = down
	}
	if n != desired {
		why += fmt.Sprintf(", stabilized to %d", n)
	}

	// Rate limits against the count in effect one period ago.
	for len(s.Changes) > 0 && p.At.Sub(s.Changes[0].At) >= c.Cfg.Period.D() {
		s.Before = s.Changes[0].Replicas
		s.Changes = s.Changes[1:]
	}
	base := s.Before
	if hi := max(base+4, 2*base); n > hi {
		n = hi
		why += fmt.Sprintf(", scale-up limited to %d", n)
	}
	n, bound := c.Job.ClampWhy(n, r)
	if bound != "" {
		why += ", " + bound
	}
	if n != r {
		s.Changes = append(s.Changes, Point{p.At, n})
	}
	s.Replicas = n
	return schemas.Decision{
		Job: c.Job.Name, At: p.At, Replicas: n, Current: r, Controller: Name,
		Reason: why + fmt.Sprintf(": %d", n),
		Inputs: map[string]float64{"lag": lag, "target": c.Cfg.Target, "desired": float64(desired)},
	}, nil
}
