package sim

import (
	"math"
	"math/rand/v2"
)

// sampler returns a function drawing one item's service time in seconds.
func (s Service) sampler() func(*rand.Rand) float64 {
	mean := s.Mean.D().Seconds()
	switch s.Dist {
	case "exponential":
		return func(rng *rand.Rand) float64 { return mean * rng.ExpFloat64() }
	case "lognormal":
		// exp(μ + σZ) with μ = ln(mean) − σ²/2 has the given mean.
		return func(rng *rand.Rand) float64 {
			return math.Exp(math.Log(mean) - s.Sigma*s.Sigma/2 + s.Sigma*rng.NormFloat64())
		}
	case "pareto":
		// Inverse transform of the Pareto with scale L, truncated at H:
		// F(x) = (1 − (L/x)^α) / (1 − (L/H)^α).
		l, h := s.paretoScale(), s.Max.D().Seconds()
		cut := 1.0
		if h > 0 {
			cut = 1 - math.Pow(l/h, s.Alpha)
		}
		return func(rng *rand.Rand) float64 { return l * math.Pow(1-rng.Float64()*cut, -1/s.Alpha) }
	case "bimodal":
		// fast·(1 − f) + fast·k·f = mean.
		fast := mean / (1 - s.SlowFraction + s.SlowFraction*s.SlowFactor)
		return func(rng *rand.Rand) float64 {
			if rng.Float64() < s.SlowFraction {
				return fast * s.SlowFactor
			}
			return fast
		}
	}
	return func(*rand.Rand) float64 { return mean }
}

// paretoScale is the scale L giving the Pareto (bounded by Max when set) the
// mean Mean: L·α/(α − 1) unbounded; found by bisection when bounded, as the
// bounded mean grows with L.
func (s Service) paretoScale() float64 {
	mean, a, h := s.Mean.D().Seconds(), s.Alpha, s.Max.D().Seconds()
	if h <= 0 {
		return mean * (a - 1) / a
	}
	boundedMean := func(l float64) float64 {
		return a / (a - 1) * l * (1 - math.Pow(l/h, a-1)) / (1 - math.Pow(l/h, a))
	}
	lo, hi := 0.0, mean
	for range 100 {
		mid := (lo + hi) / 2
		if boundedMean(mid) < mean {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// speeds returns n per-replica service-time multipliers: mean 1 with
// heterogeneity, times the straggler factor for a straggler.
func (s Service) speeds(n int, rng *rand.Rand) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
		if h := s.Heterogeneity; h > 0 {
			out[i] = math.Exp(-h*h/2 + h*rng.NormFloat64())
		}
		if s.Stragglers > 0 && rng.Float64() < s.Stragglers {
			out[i] *= s.StragglerFactor
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
