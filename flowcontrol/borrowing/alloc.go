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
		for i, it := range items {
			allocs[i] = max(it.Target, MinTarget) * p
		}
		return allocs, p, nil
	}
	p, err := sweep(req, lbSum, items, minLB)
	if err != nil {
		return nil, 0, err
	}
	for i, it := range items {
		allocs[i] = math.Max(it.LowerBound, math.Min(it.UpperBound, p*max(it.Target, MinTarget)))
	}
	return allocs, p, nil
}

// bound is a breakpoint of Σ clamp(p × target_i, lb_i, ub_i): at p = at an
// item enters (slope > 0, its lower bound) or leaves (slope < 0, its upper
// bound) the set of items whose allocation grows with p.
type bound struct {
	at    float64
	slope float64 // ±target
}

func compareBounds(a, b bound) int {
	switch {
	case a.at < b.at:
		return -1
	case a.at > b.at:
		return 1
	}
	return 0
}

// sweep raises p from the smallest relative lower bound, where every item
// sits at its lower bound and the sum is lbSum, until the sum reaches req.
//
// The bounds are laid out lower, upper, lower, upper, … and sorted with the
// same pattern-defeating quicksort that sort.Sort runs, so equal bounds are
// visited in the order kube-apiserver visits them and the floating-point sums
// agree even in ill-conditioned problems.
func sweep(req, lbSum float64, items []Item, p float64) (float64, error) {
	bs := make([]bound, 0, 2*len(items))
	for _, it := range items {
		t := max(it.Target, MinTarget)
		bs = append(bs, bound{it.LowerBound / t, t}, bound{it.UpperBound / t, -t})
	}
	slices.SortFunc(bs, compareBounds)
	sum, slope, growing := lbSum, 0.0, 0
	next := 0
	for sum < req {
		// apply every bound at or below p, then look at the next one above
		for ; next < len(bs) && bs[next].at <= p; next++ {
			slope += bs[next].slope
			if bs[next].slope > 0 {
				growing++
			} else {
				growing--
			}
		}
		if next >= len(bs) {
			return 0, errors.New("impossible: ran out of bounds in a bound-constrained problem")
		}
		upto := bs[next].at
		if growing == 0 {
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
