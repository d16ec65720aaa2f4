package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// OracleResult is the cheapest schedule found with perfect knowledge.
type OracleResult struct {
	// Replicas is the count started at time 0; Makespan when the last item ends (s).
	Replicas int     `json:"replicas"`
	Makespan float64 `json:"makespan_s"`
	// ReplicaSeconds is the schedule's cost: each replica from 0 (start-up
	// included) until its last item ends.
	ReplicaSeconds float64 `json:"replica_seconds"`
	// LowerBound is ceil(W/(D−d))·d + W for the fastest replica speed: no
	// schedule meeting the deadline costs less.
	LowerBound float64 `json:"lower_bound"`
	// Feasible is whether some schedule with at most max replicas meets the deadline.
	Feasible bool `json:"feasible"`
}

// Oracle computes, for a batch scenario and the item times drawn for seed,
// the least replica-seconds that meet the deadline given perfect knowledge of
// every item's time (see doc.go): for each n from min to max it starts n
// replicas at once and packs the items longest-first onto the replica that
// finishes each earliest (LPT), each replica leaving after its last item; the
// cheapest n whose makespan meets the deadline wins. When none does, the
// result at max is returned with Feasible false.
func Oracle(s Scenario, items []float64) OracleResult {
	return oracle(s, items, s.Seed)
}

func oracle(s Scenario, items []float64, seed uint64) OracleResult {
	speeds := s.Service.speeds(s.Replicas.Max, rand.New(rand.NewPCG(seed, 4)))
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b float64) int { return cmp.Compare(b, a) })
	d := s.Workers.Startup.D().Seconds()
	deadline := s.Deadline.D().Seconds()
	per := s.Workers.Dispatch.D().Seconds() + s.Workers.Overhead.D().Seconds()

	var work float64
	for _, x := range items {
		work += x*slices.Min(speeds) + per
	}
	lb := math.Inf(1)
	if deadline > d {
		lb = math.Ceil(work/(deadline-d)-1e-9)*d + work
	}
	best := OracleResult{ReplicaSeconds: math.Inf(1)}
	var last OracleResult
	for n := max(s.Replicas.Min, 1); n <= s.Replicas.Max; n++ {
		o := lpt(sorted, speeds[:n], d, per, s.Slowdown)
		o.Replicas = n
		if float64(len(items))*s.Workers.Dispatch.D().Seconds()+d > deadline {
			o.Makespan = math.Max(o.Makespan, float64(len(items))*s.Workers.Dispatch.D().Seconds()+d)
		}
		o.Feasible = o.Makespan <= deadline+1e-9
		last = o
		if o.Feasible && o.ReplicaSeconds < best.ReplicaSeconds {
			best = o
		}
	}
	if !best.Feasible {
		best = last
	}
	best.LowerBound = round6(math.Min(lb, best.ReplicaSeconds))
	best.ReplicaSeconds, best.Makespan = round6(best.ReplicaSeconds), round6(best.Makespan)
	return best
}

// lpt packs sorted (longest first) items onto replicas with the given
// service-time multipliers, all ready at d.
func lpt(sorted, speeds []float64, d, per float64, slow Slowdown) OracleResult {
	free := make([]float64, len(speeds))
	for i := range free {
		free[i] = d
	}
	at := slow.At.D().Seconds()
	for _, x := range sorted {
		bi, bf := 0, math.Inf(1)
		for i, f := range free {
			factor := 1.0
			if slow.Factor != 1 && f >= at {
				factor = slow.Factor
			}
			if end := f + per + x*speeds[i]*factor; end < bf {
				bi, bf = i, end
			}
		}
		free[bi] = bf
	}
	var o OracleResult
	for _, f := range free {
		if f > d { // a replica that got no item is not started
			o.ReplicaSeconds += f
			o.Makespan = math.Max(o.Makespan, f)
		}
	}
	return o
}
