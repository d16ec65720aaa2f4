package shufflesharding

import "slices"

// MouseCrushProbability returns the probability that a given mouse (a flow
// of its own) finds every queue of its hand taken by at least one of
// elephants other flows, when each flow's hand is an independent, uniformly
// random handSize-subset of deckSize queues: the table of the Kubernetes APF
// documentation, computed by the KEP's recurrence over U_k, the number of
// distinct queues the first k elephants cover:
//
//	P(U_1 = H) = 1
//	P(U_k = u) = Σ_{n=0..H} P(U_{k−1} = u−n) · C(D−(u−n), n) · C(u−n, H−n) / C(D, H)
//	P(crushed) = Σ_u P(U_k = u) · C(u, H) / C(D, H)
//
// Sums add their terms in ascending order for accuracy; each step's sum is
// divided by C(D, H) once. It returns 0 for
// elephants < 1 or invalid sizes.
func MouseCrushProbability(deckSize, handSize, elephants int) float64 {
	d, h := deckSize, handSize
	if elephants < 1 || h < 1 || h > d {
		return 0
	}
	total := choose(d, h)
	p := make([]float64, d+1) // p[u] = P(U_k = u)
	p[h] = 1
	for k := 2; k <= elephants; k++ {
		next := make([]float64, d+1)
		for u := h; u <= d; u++ {
			terms := make([]float64, 0, h+1)
			for n := 0; n <= h; n++ {
				prev := u - n
				if prev < h || prev > d || p[prev] == 0 {
					continue
				}
				terms = append(terms, p[prev]*choose(d-prev, n)*choose(prev, h-n))
			}
			next[u] = ascendingSum(terms) / total
		}
		p = next
	}
	terms := make([]float64, 0, d+1)
	for u := h; u <= d; u++ {
		terms = append(terms, p[u]*choose(u, h)/total)
	}
	return ascendingSum(terms)
}

// choose is C(n, m) as the running product n/1 · (n−1)/2 · … · (n−m+1)/m
// in float64, in that order (the order the published table was computed in).
func choose(n, m int) float64 {
	if m < 0 || m > n {
		return 0
	}
	if m == 0 || m == n {
		return 1
	}
	c := float64(n)
	for i := 1; i < m; i++ {
		c = c * float64(n-i) / float64(i+1)
	}
	return c
}

func ascendingSum(terms []float64) float64 {
	slices.Sort(terms)
	var s float64
	for _, t := range terms {
		s += t
	}
	return s
}
