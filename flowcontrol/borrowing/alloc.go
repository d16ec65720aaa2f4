package borrowing

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MinTarget is the smallest target Allocate uses; smaller ones are raised to it.
const MinTarget = 0.001

// epsilon is the tolerance on the bound sums.
const epsilon = 1e-7

// Item is one class of an allocation problem.
type Item struct {
	Target     float64
	LowerBound float64
	UpperBound float64
}

// Allocate returns allocs summing to required, each alloc_i =
// clamp(fairProp × target_i, lb_i, ub_i), and that fairProp. It fails if a
// bound is negative or inverted, a target is below its lower bound, or the
// bounds cannot meet the sum.
func Allocate(required int, items []Item) ([]float64, float64, error) {
	if required < 0 {
		return nil, 0, errors.New("negative sums are not supported")
	}
	req := float64(required)
	targets := make([]float64, len(items))
	var lbSum, ubSum, targetSum float64
	minLB, maxLB := math.MaxFloat32, -math.MaxFloat64
	minUB, maxUB := math.MaxFloat32, -math.MaxFloat64
	for i, it := range items {
		switch {
		case it.LowerBound < 0:
			return nil, 0, fmt.Errorf("lower bound %d is %v but negative lower bounds are not allowed", i, it.LowerBound)
		case it.Target < it.LowerBound:
			return nil, 0, fmt.Errorf("target %d is %v, which is below its lower bound of %v", i, it.Target, it.LowerBound)
		case it.UpperBound < it.LowerBound:
			return nil, 0, fmt.Errorf("upper bound %d is %v but should not be less than the lower bound %v", i, it.UpperBound, it.LowerBound)
		}
		t := max(it.Target, MinTarget)
		targets[i] = t
		lbSum += it.LowerBound
		ubSum += it.UpperBound
		targetSum += t
		minLB, maxLB = min(minLB, it.LowerBound/t), max(maxLB, it.LowerBound/t)
		minUB, maxUB = min(minUB, it.UpperBound/t), max(maxUB, it.UpperBound/t)
	}
	switch {
	case maxLB > 1:
		return nil, 0, fmt.Errorf("a lower bound exceeds its target by the factor %v", maxLB)
	case lbSum-req > epsilon:
		return nil, 0, fmt.Errorf("lower bounds sum to %v, which is higher than the required sum of %v", lbSum, required)
	case req-ubSum > epsilon:
		return nil, 0, fmt.Errorf("upper bounds sum to %v, which is lower than the required sum of %v", ubSum, required)
	}
	allocs := make([]float64, len(items))
	switch {
	case required == 0:
		return allocs, 0, nil
	case lbSum-req > -epsilon: // pinned at the lower bounds
		for i, it := range items {
			allocs[i] = it.LowerBound
		}
		return allocs, minLB, nil
	case req-ubSum > -epsilon: // pinned at the upper bounds
		for i, it := range items {
			allocs[i] = it.UpperBound
		}
		return allocs, maxUB, nil
	}
	if p := req / targetSum; maxLB <= p && p <= minUB { // no bound binds
		for i := range items {
			allocs[i] = targets[i] * p
		}
		return allocs, p, nil
	}
	p, err := sweep(req, lbSum, items, targets, minLB)
	if err != nil {
		return nil, 0, err
	}
	for i, it := range items {
		allocs[i] = math.Max(it.LowerBound, math.Min(it.UpperBound, p*targets[i]))
	}
	return allocs, p, nil
}

// bound is a breakpoint of Σ clamp(p × target_i, lb_i, ub_i): at p = at the
// slope changes by dSlope.
type bound struct {
	at     float64
	dSlope float64
}

// sweep raises p from the smallest relative lower bound, where every item
// sits at its lower bound and the sum is lbSum, until the sum reaches req.
func sweep(req, lbSum float64, items []Item, targets []float64, p float64) (float64, error) {
	bounds := make([]bound, 0, 2*len(items))
	for i, it := range items {
		bounds = append(bounds, bound{it.LowerBound / targets[i], targets[i]}, bound{it.UpperBound / targets[i], -targets[i]})
	}
	slices.SortStableFunc(bounds, func(a, b bound) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	sum, slope := lbSum, 0.0
	next := 0
	for sum < req {
		// apply every bound at p, then find the next bound above p
		for next < len(bounds) && bounds[next].at <= p {
			slope += bounds[next].dSlope
			next++
		}
		if next >= len(bounds) {
			return 0, errors.New("impossible: ran out of bounds in a bound-constrained problem")
		}
		upto := bounds[next].at
		if slope == 0 {
			p = upto
			continue
		}
		if cand := p + (req-sum)/slope; cand <= upto {
			return cand, nil
		}
		sum += (upto - p) * slope
		p = upto
	}
	return p, nil
}
