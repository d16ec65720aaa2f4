package borrowing

import "math/rand/v2"

// RandomProblem returns a feasible random allocation problem in the style of
// upstream's TestConcAlloc: 0–9 items, a quarter with zero targets, bounds
// below, around or above the targets. Tests and the conformance module use it.
func RandomProblem(rng *rand.Rand) (int, []Item) {
	sizes := []int{0, 1, 2, 3, 4, 6, 9}
	n := sizes[rng.IntN(len(sizes))]
	items := make([]Item, n)
	var lbSum, ubSum float64
	for i := range items {
		target := 0.0
		if rng.Float64() >= 0.25 {
			target = float64(rng.IntN(100)) + rng.Float64()
		}
		lb := target * rng.Float64()
		if rng.IntN(10) == 0 {
			lb = target // pinned from below
		}
		ub := target + float64(rng.IntN(50))*rng.Float64()
		if rng.IntN(10) == 0 {
			ub = lb // pinned from above
		}
		items[i] = Item{Target: target, LowerBound: lb, UpperBound: ub}
		lbSum += lb
		ubSum += ub
	}
	lo, hi := int(lbSum+1-1e-9), int(ubSum)
	if n == 0 || hi < lo {
		return 0, nil
	}
	return lo + rng.IntN(hi-lo+1), items
}
