package sim

import (
	"math"
	"math/rand/v2"
)

// draw returns one item's service time in seconds.
func (s Service) draw(rng *rand.Rand) float64 {
	mean := s.Mean.D().Seconds()
	switch s.Dist {
	case "exponential":
		return mean * rng.ExpFloat64()
	case "lognormal":
		// exp(μ + σZ) with μ = ln(mean) − σ²/2 has the given mean.
		return math.Exp(math.Log(mean) - s.Sigma*s.Sigma/2 + s.Sigma*rng.NormFloat64())
	case "bimodal":
		// fast·(1 − f) + fast·k·f = mean.
		fast := mean / (1 - s.SlowFraction + s.SlowFraction*s.SlowFactor)
		if rng.Float64() < s.SlowFraction {
			return fast * s.SlowFactor
		}
		return fast
	}
	return mean
}

// speeds returns n per-replica service-time multipliers with mean 1.
func (s Service) speeds(n int, rng *rand.Rand) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
		if h := s.Heterogeneity; h > 0 {
			out[i] = math.Exp(-h*h/2 + h*rng.NormFloat64())
		}
	}
	return out
}

// rate is the streaming arrival rate (items/s) at t seconds.
func (a Arrivals) rate(t float64) float64 {
	switch a.Kind {
	case "step":
		if t >= a.StepAt.D().Seconds() {
			return a.StepRate
		}
	case "diurnal":
		if p := a.Period.D().Seconds(); p > 0 {
			return math.Max(0, a.Rate*(1+a.Amplitude*math.Sin(2*math.Pi*t/p)))
		}
	}
	return a.Rate
}
