package borrowing

import (
	"math"
	"time"

	"github.com/pace-platform/pace/flowcontrol/integrator"
)

// AdjustmentPeriod is how often limits are rebalanced.
const AdjustmentPeriod = 10 * time.Second

// SmoothingCoefficient is A in smoothed = max(env, A×smoothed + (1−A)×env).
const SmoothingCoefficient = 0.977

// DemandStats is a level's seat demand as of the last adjustment.
type DemandStats struct {
	HighWatermark int
	Average       float64
	StdDev        float64
	Smoothed      float64
}

// Update folds one period's integrator results into the stats.
func (s *DemandStats) Update(obs integrator.Results) {
	s.HighWatermark = int(math.Round(obs.Max))
	if obs.Duration <= 0 {
		return
	}
	if math.IsNaN(obs.Deviation) {
		obs.Deviation = 0
	}
	s.Average, s.StdDev = obs.Average, obs.Deviation
	env := obs.Average + obs.Deviation
	s.Smoothed = math.Max(env, SmoothingCoefficient*s.Smoothed+(1-SmoothingCoefficient)*env)
}

// LevelState is what Adjust needs to know about one level.
type LevelState struct {
	Exempt bool
	Limits Limits
	Demand DemandStats
	// Current is the limit in force; it is kept if the allocation fails.
	Current int
}

// Allocation is the outcome of one adjustment.
type Allocation struct {
	// Current is each level's new concurrency limit.
	Current []int
	// Target is each level's seat target: max(its floor, smoothed demand) for
	// a non-exempt level (kube's target_seats), and for an exempt level the
	// seats it takes off the top, max(MinCL, high watermark). Kube publishes
	// the first non-exempt level's target for exempt levels (reference §1.12
	// item 2); Pace publishes this instead.
	Target []float64
	// FairFraction is the fair proportion, 0 unless the fair allocation ran.
	FairFraction float64
}

// Adjust returns each level's new concurrency limit and target and the fair
// fraction. nominalSum is the sum of nominal limits.
func Adjust(nominalSum int, levels []LevelState) Allocation {
	out := make([]int, len(levels))
	targets := make([]float64, len(levels))
	minCurrent := make([]int, len(levels))
	items := make([]Item, 0, len(levels))
	itemOf := make([]int, len(levels))
	remaining := nominalSum
	var minSum, minCurrentSum int
	for i, l := range levels {
		hw := l.Demand.HighWatermark
		if l.Exempt {
			minCurrent[i] = max(l.Limits.Min, hw)
			out[i] = minCurrent[i]
			targets[i] = float64(minCurrent[i])
			remaining -= minCurrent[i]
			itemOf[i] = -1
			continue
		}
		minCurrent[i] = max(l.Limits.Min, min(l.Limits.Nominal, hw))
		itemOf[i] = len(items)
		targets[i] = math.Max(float64(minCurrent[i]), l.Demand.Smoothed)
		items = append(items, Item{
			LowerBound: float64(minCurrent[i]),
			UpperBound: float64(l.Limits.Max),
			Target:     targets[i],
		})
		minSum += l.Limits.Min
		minCurrentSum += minCurrent[i]
	}
	if len(items) == 0 {
		return Allocation{Current: out, Target: targets}
	}
	var allocs []float64
	var fair, shareFrac float64
	switch {
	case remaining <= minSum:
	case remaining <= minCurrentSum:
		shareFrac = float64(remaining-minSum) / float64(minCurrentSum-minSum)
	default:
		var err error
		if allocs, fair, err = Allocate(nominalSum, items); err != nil {
			allocs = nil
			fair = 0
		}
	}
	for i, l := range levels {
		switch idx := itemOf[i]; {
		case idx < 0:
		case remaining <= minSum:
			out[i] = l.Limits.Min
		case remaining <= minCurrentSum:
			out[i] = l.Limits.Min + int(math.Round(float64(minCurrent[i]-l.Limits.Min)*shareFrac))
		case allocs == nil:
			out[i] = l.Current
		default:
			out[i] = int(math.Round(allocs[idx]))
		}
	}
	return Allocation{Current: out, Target: targets, FairFraction: fair}
}
