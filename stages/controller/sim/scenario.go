package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/pace-platform/pace/schemas"
)

// Scenario is one simulated workload, read from YAML (examples/scenarios).
// Durations are strings such as "200ms" or numbers of seconds.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Seed makes the run reproducible; the same seed gives the same output.
	Seed uint64 `json:"seed,omitempty"`
	// Mode is batch (Items known up front, a Deadline) or streaming (Arrivals for Duration).
	Mode     schemas.JobMode  `json:"mode,omitempty"`
	Items    int              `json:"items,omitempty"`
	Deadline schemas.Duration `json:"deadline,omitempty"`
	// Duration is how long arrivals last (streaming) or the horizon of a
	// batch run (default 5 × deadline).
	Duration schemas.Duration `json:"duration,omitempty"`
	// Repeat runs the job this many times with seeds Seed, Seed+1, … and adds
	// up the results (many small jobs); default 1.
	Repeat   int      `json:"repeat,omitempty"`
	Service  Service  `json:"service"`
	Slowdown Slowdown `json:"slowdown,omitzero"`
	Arrivals Arrivals `json:"arrivals,omitzero"`
	Workers  Workers  `json:"workers,omitzero"`
	// MonitorPeriod is the collector's sampling period (default 2s);
	// RateWindow the processor's smoothing window (default 10s).
	MonitorPeriod schemas.Duration `json:"monitor_period,omitempty"`
	RateWindow    schemas.Duration `json:"rate_window,omitempty"`
	// CheckInterval is the least time between two decisions (0: every sample).
	CheckInterval schemas.Duration `json:"check_interval,omitempty"`
	// ActuationDelay is the time from a decision to the replicas being asked for.
	ActuationDelay schemas.Duration `json:"actuation_delay,omitempty"`
	Replicas       schemas.Replicas `json:"replicas"`
	// LatencyTarget is a streaming job's objective on item latency (p99).
	LatencyTarget schemas.Duration `json:"latency_target,omitempty"`
	// Controllers holds per-controller parameters, by plugin name.
	Controllers map[string]json.RawMessage `json:"controllers,omitempty"`
	// Calibration, when set, also runs the job at each fixed replica count and
	// compares the time to finish with a measured curve.
	Calibration *Calibration `json:"calibration,omitempty"`
}

// Service describes per-item service times.
type Service struct {
	// Dist is constant, exponential, lognormal, pareto or bimodal.
	Dist string           `json:"dist"`
	Mean schemas.Duration `json:"mean"`
	// Sigma is the lognormal's shape (default 1).
	Sigma float64 `json:"sigma,omitempty"`
	// Alpha is the Pareto's tail index (> 1, so that the mean exists):
	// P(X > x) = (x_m/x)^alpha. Max, when set, bounds it (a bounded Pareto,
	// truncated at Max); the mean stays Mean.
	Alpha float64          `json:"alpha,omitempty"`
	Max   schemas.Duration `json:"max,omitempty"`
	// SlowFraction of items take SlowFactor × the fast time (bimodal); the mean stays Mean.
	SlowFraction float64 `json:"slow_fraction,omitempty"`
	SlowFactor   float64 `json:"slow_factor,omitempty"`
	// Heterogeneity is the lognormal sigma of per-replica speed (time multiplier, mean 1).
	Heterogeneity float64 `json:"heterogeneity,omitempty"`
	// Stragglers is the fraction of replicas that run every item
	// StragglerFactor times slower (a slow or overloaded node).
	Stragglers      float64 `json:"stragglers,omitempty"`
	StragglerFactor float64 `json:"straggler_factor,omitempty"`
}

// Slowdown multiplies the service time of items started after At by Factor.
type Slowdown struct {
	At     schemas.Duration `json:"at,omitempty"`
	Factor float64          `json:"factor,omitempty"`
}

// Arrivals is a streaming job's arrival process (items/s).
type Arrivals struct {
	// Kind is constant, step, diurnal or bursts.
	Kind string  `json:"kind,omitempty"`
	Rate float64 `json:"rate,omitempty"`
	// Step: the rate becomes StepRate at StepAt.
	StepAt   schemas.Duration `json:"step_at,omitempty"`
	StepRate float64          `json:"step_rate,omitempty"`
	// Diurnal: rate·(1 + Amplitude·sin(2πt/Period)).
	Period    schemas.Duration `json:"period,omitempty"`
	Amplitude float64          `json:"amplitude,omitempty"`
	// Bursts: BurstSize extra items every BurstEvery.
	BurstEvery schemas.Duration `json:"burst_every,omitempty"`
	BurstSize  int              `json:"burst_size,omitempty"`
}

// Workers describes the worker model.
type Workers struct {
	// Startup is the time from a replica being asked for to it taking items.
	Startup schemas.Duration `json:"startup,omitempty"`
	// FailureRate is the probability that an attempt crashes its worker: the
	// item is redelivered when its Lease expires, the worker restarts.
	FailureRate float64          `json:"failure_rate,omitempty"`
	Lease       schemas.Duration `json:"lease,omitempty"`
	// Dispatch is the queue's serial time per delivered item (a shared
	// bottleneck); Overhead the per-item time a worker spends besides the work.
	Dispatch schemas.Duration `json:"dispatch,omitempty"`
	Overhead schemas.Duration `json:"overhead,omitempty"`
}

// Calibration is a step experiment: time to finish at fixed replica counts.
type Calibration struct {
	Replicas []int `json:"replicas"`
	// Measured are the reference times to finish (s), one per replica count.
	Measured []float64 `json:"measured,omitempty"`
	Source   string    `json:"source,omitempty"`
}

// Load reads a scenario file, applies defaults and validates it.
func Load(path string) (Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, err
	}
	var s Scenario
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Scenario{}, fmt.Errorf("%s: %w", path, err)
	}
	s.Defaults()
	if errs := s.Validate(); len(errs) > 0 {
		return Scenario{}, fmt.Errorf("%s: %w", path, errs.ToAggregate())
	}
	return s, nil
}

// Defaults fills unset fields.
func (s *Scenario) Defaults() {
	if s.Mode == "" {
		s.Mode = schemas.Batch
		if s.Items == 0 {
			s.Mode = schemas.Streaming
		}
	}
	if s.Repeat == 0 {
		s.Repeat = 1
	}
	if s.Duration == 0 && s.Mode == schemas.Batch {
		s.Duration = 5 * s.Deadline
	}
	if s.Service.Dist == "" {
		s.Service.Dist = "constant"
	}
	if s.Service.Sigma == 0 {
		s.Service.Sigma = 1
	}
	if s.Workers.Lease == 0 {
		s.Workers.Lease = schemas.Duration(30 * time.Second)
	}
	if s.MonitorPeriod == 0 {
		s.MonitorPeriod = schemas.Duration(2 * time.Second)
	}
	if s.RateWindow == 0 {
		s.RateWindow = schemas.Duration(10 * time.Second)
	}
	r := &s.Replicas
	if r.Min == 0 && r.Max == 0 {
		r.Min, r.Max = 1, 10
	}
	if r.Initial == 0 {
		r.Initial = max(r.Min, 1)
	}
	if s.Slowdown.Factor == 0 {
		s.Slowdown.Factor = 1
	}
	if s.LatencyTarget == 0 {
		s.LatencyTarget = schemas.Duration(30 * time.Second)
	}
}

// Validate checks a defaulted scenario.
func (s Scenario) Validate() field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), ""))
	}
	switch s.Mode {
	case schemas.Batch:
		if s.Items < 1 {
			errs = append(errs, field.Invalid(field.NewPath("items"), s.Items, "a batch scenario needs items"))
		}
		if s.Deadline <= 0 {
			errs = append(errs, field.Required(field.NewPath("deadline"), "a batch scenario needs a deadline"))
		}
	case schemas.Streaming:
		if s.Duration <= 0 {
			errs = append(errs, field.Required(field.NewPath("duration"), "a streaming scenario needs a duration"))
		}
		switch s.Arrivals.Kind {
		case "constant", "step", "diurnal", "bursts":
		default:
			errs = append(errs, field.NotSupported(field.NewPath("arrivals", "kind"), s.Arrivals.Kind, []string{"constant", "step", "diurnal", "bursts"}))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("mode"), s.Mode, []schemas.JobMode{schemas.Batch, schemas.Streaming}))
	}
	switch s.Service.Dist {
	case "constant", "exponential", "lognormal":
	case "pareto":
		if s.Service.Alpha <= 1 || math.IsNaN(s.Service.Alpha) {
			errs = append(errs, field.Invalid(field.NewPath("service", "alpha"), s.Service.Alpha, "pareto needs alpha > 1 (a finite mean)"))
		}
		if s.Service.Max != 0 && s.Service.Max <= s.Service.Mean {
			errs = append(errs, field.Invalid(field.NewPath("service", "max"), s.Service.Max.D().String(), "must be above the mean"))
		}
	case "bimodal":
		if s.Service.SlowFraction <= 0 || s.Service.SlowFraction >= 1 || s.Service.SlowFactor < 1 {
			errs = append(errs, field.Invalid(field.NewPath("service"), s.Service.Dist, "bimodal needs 0 < slow_fraction < 1 and slow_factor >= 1"))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("service", "dist"), s.Service.Dist, []string{"constant", "exponential", "lognormal", "pareto", "bimodal"}))
	}
	if f := s.Service.Stragglers; f < 0 || f >= 1 || math.IsNaN(f) || (f > 0 && s.Service.StragglerFactor < 1) {
		errs = append(errs, field.Invalid(field.NewPath("service", "stragglers"), f, "must be in [0, 1), with straggler_factor >= 1"))
	}
	if s.Service.Mean <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("service", "mean"), s.Service.Mean.D().String(), "must be positive"))
	}
	if s.Workers.FailureRate < 0 || s.Workers.FailureRate >= 0.5 || math.IsNaN(s.Workers.FailureRate) {
		errs = append(errs, field.Invalid(field.NewPath("workers", "failure_rate"), s.Workers.FailureRate, "must be in [0, 0.5)"))
	}
	r := s.Replicas
	if r.Min < 0 || r.Max < 1 || r.Max < r.Min || r.Initial < r.Min || r.Initial > r.Max {
		errs = append(errs, field.Invalid(field.NewPath("replicas"), r, "want 0 <= min <= initial <= max, max >= 1"))
	}
	if s.Repeat < 1 || s.Repeat > 100 {
		errs = append(errs, field.Invalid(field.NewPath("repeat"), s.Repeat, "must be in [1, 100]"))
	}
	if c := s.Calibration; c != nil && len(c.Measured) > 0 && len(c.Measured) != len(c.Replicas) {
		errs = append(errs, field.Invalid(field.NewPath("calibration", "measured"), len(c.Measured), "one value per replica count"))
	}
	return errs
}
