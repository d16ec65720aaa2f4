// Package integrator keeps time-weighted statistics of a piecewise-constant
// value, such as the seat demand of a priority level: ∫x dt, ∫x² dt, min and
// max since the last Reset (reference §1.10). Borrowing reads it every
// adjustment period.
package integrator

import (
	"math"
	"sync"
	"time"
)

// Clock reads the current time; k8s.io/utils clocks and event clocks satisfy it.
type Clock interface {
	Now() time.Time
}

// Results summarises one period.
type Results struct {
	Duration  float64 // seconds
	Average   float64
	Deviation float64 // population standard deviation; NaN if rounding made the variance negative
	Min, Max  float64
}

// Integrator accumulates statistics of x over time. It is safe for concurrent use.
type Integrator struct {
	clock Clock

	mu           sync.Mutex // guards the fields below
	lastTime     time.Time
	x            float64
	min, max     float64
	dur, sx, sxx float64 // seconds, ∫x dt, ∫x² dt
}

// New returns an Integrator whose value starts at 0 now.
func New(clk Clock) *Integrator {
	return &Integrator{clock: clk, lastTime: clk.Now()}
}

// Set changes the value to x as of now.
func (ig *Integrator) Set(x float64) {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	ig.setLocked(x)
}

// Add changes the value by dx as of now.
func (ig *Integrator) Add(dx float64) {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	ig.setLocked(ig.x + dx)
}

func (ig *Integrator) setLocked(x float64) {
	ig.updateLocked()
	ig.x = x
	ig.min = math.Min(ig.min, x)
	ig.max = math.Max(ig.max, x)
}

func (ig *Integrator) updateLocked() {
	now := ig.clock.Now()
	dt := now.Sub(ig.lastTime).Seconds()
	ig.lastTime = now
	ig.dur += dt
	ig.sx += ig.x * dt
	ig.sxx += ig.x * ig.x * dt
}

// Results returns the statistics since the last Reset without resetting.
func (ig *Integrator) Results() Results {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	ig.updateLocked()
	return ig.resultsLocked()
}

// Reset returns the statistics since the last Reset and starts a new period
// whose min and max are the current value.
func (ig *Integrator) Reset() Results {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	ig.updateLocked()
	r := ig.resultsLocked()
	ig.dur, ig.sx, ig.sxx = 0, 0, 0
	ig.min, ig.max = ig.x, ig.x
	return r
}

func (ig *Integrator) resultsLocked() Results {
	r := Results{Duration: ig.dur, Min: ig.min, Max: ig.max}
	if ig.dur > 0 {
		r.Average = ig.sx / ig.dur
		if variance := ig.sxx/ig.dur - r.Average*r.Average; variance >= 0 {
			r.Deviation = math.Sqrt(variance)
		} else {
			r.Deviation = math.NaN()
		}
	}
	return r
}
