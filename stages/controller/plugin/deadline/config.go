package deadline

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin"
)

// Config holds the deadline controller's parameters. Zero values mean the
// defaults given on each field; Defaults fills them.
type Config struct {
	// StartupDelay is how long a new worker takes to start; default 10s.
	StartupDelay schemas.Duration `json:"startup_delay,omitempty"`
	// RateWindow is the time constant of the throughput estimate; default 60s.
	RateWindow schemas.Duration `json:"rate_window,omitempty"`
	// PriorRate is the per-replica items/s assumed before any is measured; 0: unknown.
	PriorRate float64 `json:"prior_rate,omitempty"`
	// Margin is the fraction of the time left kept as slack; default 0.05.
	Margin *float64 `json:"margin,omitempty"`
	// LatenessGain scales the extra slack planned per unit of lateness
	// (−error); default 1. MaxCorrection bounds it; default 0.2.
	LatenessGain  *float64 `json:"lateness_gain,omitempty"`
	MaxCorrection *float64 `json:"max_correction,omitempty"`
	// CatchUp is the time a streaming job is given to drain its backlog; default 30s.
	CatchUp schemas.Duration `json:"catch_up,omitempty"`
	// ScaleUpWindow and ScaleDownWindow are the stabilization windows;
	// defaults 0s and 10s.
	ScaleUpWindow   *schemas.Duration `json:"scale_up_window,omitempty"`
	ScaleDownWindow *schemas.Duration `json:"scale_down_window,omitempty"`
	// ToleranceUp and ToleranceDown are the dead-bands (fractions of the
	// replicas); defaults 0 and 0.5. A batch job's work is the same whoever does
	// it, so a scale-down before the tail saves little and may cost a start-up later.
	ToleranceUp   *float64 `json:"tolerance_up,omitempty"`
	ToleranceDown *float64 `json:"tolerance_down,omitempty"`
	// MaxUpPods and MaxUpPercent limit a scale-up to max(pods, r·percent/100);
	// defaults 4 and 100. MaxDownPercent limits a scale-down; default 50.
	MaxUpPods      int     `json:"max_up_pods,omitempty"`
	MaxUpPercent   float64 `json:"max_up_percent,omitempty"`
	MaxDownPercent float64 `json:"max_down_percent,omitempty"`
}

func orFloat(p **float64, v float64) {
	if *p == nil {
		*p = &v
	}
}

func orDuration(p **schemas.Duration, v time.Duration) {
	if *p == nil {
		d := schemas.Duration(v)
		*p = &d
	}
}

// Defaults fills unset fields; none depends on the job.
func (c *Config) Defaults(plugin.Job) {
	if c.StartupDelay == 0 {
		c.StartupDelay = schemas.Duration(10 * time.Second)
	}
	if c.RateWindow == 0 {
		c.RateWindow = schemas.Duration(60 * time.Second)
	}
	if c.CatchUp == 0 {
		c.CatchUp = schemas.Duration(30 * time.Second)
	}
	orFloat(&c.Margin, 0.05)
	orFloat(&c.LatenessGain, 1)
	orFloat(&c.MaxCorrection, 0.2)
	orFloat(&c.ToleranceUp, 0)
	orFloat(&c.ToleranceDown, 0.5)
	orDuration(&c.ScaleUpWindow, 0)
	orDuration(&c.ScaleDownWindow, 10*time.Second)
	if c.MaxUpPods == 0 {
		c.MaxUpPods = 4
	}
	if c.MaxUpPercent == 0 {
		c.MaxUpPercent = 100
	}
	if c.MaxDownPercent == 0 {
		c.MaxDownPercent = 50
	}
}

// Validate checks the parameters; call after Defaults.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	for _, d := range []struct {
		name string
		v    schemas.Duration
	}{{"startup_delay", c.StartupDelay}, {"rate_window", c.RateWindow}, {"catch_up", c.CatchUp},
		{"scale_up_window", *c.ScaleUpWindow}, {"scale_down_window", *c.ScaleDownWindow}} {
		if d.v < 0 || d.v.D() > time.Hour {
			errs = append(errs, field.Invalid(field.NewPath(d.name), d.v.D().String(), "must be in [0, 1h]"))
		}
	}
	for _, f := range []struct {
		name   string
		v, max float64
	}{{"prior_rate", c.PriorRate, math.MaxFloat64}, {"margin", *c.Margin, 0.9}, {"lateness_gain", *c.LatenessGain, 100},
		{"max_correction", *c.MaxCorrection, 0.9}, {"tolerance_up", *c.ToleranceUp, 0.99}, {"tolerance_down", *c.ToleranceDown, 0.99},
		{"max_up_percent", c.MaxUpPercent, 10000}, {"max_down_percent", c.MaxDownPercent, 100}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > f.max {
			errs = append(errs, field.Invalid(field.NewPath(f.name), f.v, "out of range"))
		}
	}
	if *c.Margin+*c.MaxCorrection >= 0.95 {
		errs = append(errs, field.Invalid(field.NewPath("max_correction"), *c.MaxCorrection, "margin + max_correction must be < 0.95"))
	}
	if c.MaxUpPods < 1 {
		errs = append(errs, field.Invalid(field.NewPath("max_up_pods"), c.MaxUpPods, "must be >= 1"))
	}
	return errs
}
