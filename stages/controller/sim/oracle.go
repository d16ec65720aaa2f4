package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/pace-platform/pace/schemas"
)

// packed is an item to pack: its service time, how many of its attempts are left
// to crash, and when it can be taken.
type packed struct {
	time, ready float64
	crashes     int
}

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
// cheapest n whose makespan meets the deadline wins. With failures it knows
// how many attempts of each item crash, as the simulated run meets them (see
// doc.go). When none does, the result at max is
// returned with Feasible false.
func Oracle(s Scenario, items []float64) OracleResult {
	return oracle(s, items, s.Seed)
}

func oracle(s Scenario, items []float64, seed uint64) OracleResult {
	speeds := s.Service.speeds(s.Replicas.Max, rand.New(rand.NewPCG(seed, 4)))
	crashes := itemCrashes(s, len(items), seed)
	sorted := make([]packed, len(items))
	for i, x := range items {
		sorted[i] = packed{time: x, crashes: crashes[i]}
	}
	slices.SortStableFunc(sorted, func(a, b packed) int { return cmp.Compare(b.time, a.time) })
	d := s.Workers.Startup.D().Seconds()
	deadline := s.Deadline.D().Seconds()
	per := s.Workers.Dispatch.D().Seconds() + s.Workers.Overhead.D().Seconds()

	var work float64
	for _, x := range items {
		work += x*slices.Min(speeds) + per
	}
	lb := math.Inf(1)
	if deadline > d {
		lb = float64(schemas.ReplicasFor(work, deadline-d))*d + work
	}
	best := OracleResult{ReplicaSeconds: math.Inf(1)}
	var last OracleResult
	for n := max(s.Replicas.Min, 1); n <= s.Replicas.Max; n++ {
		o := lpt(sorted, speeds[:n], d, per, s.Workers.Lease.D().Seconds(), s.Slowdown)
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

// lpt packs items (longest first) onto replicas with the given service-time
// multipliers, all ready at d. Each crash of an item costs the replica that
// takes the attempt half of it and a restart; the item is packed again, before
// shorter ones, once its lease has expired (no replica waits for it while other
// items are left).
func lpt(items []packed, speeds []float64, d, per, lease float64, slow Slowdown) OracleResult {
	free := make([]float64, len(speeds))
	for i := range free {
		free[i] = d
	}
	at := slow.At.D().Seconds()
	var retries []packed // by ready time
	next := 0
	for next < len(items) || len(retries) > 0 {
		var it packed
		if len(retries) > 0 && (retries[0].ready <= slices.Min(free) || next == len(items)) {
			it, retries = retries[0], retries[1:]
		} else {
			it, next = items[next], next+1
		}
		bi, bs, bf := 0, 0.0, math.Inf(1)
		for i, f := range free {
			start := math.Max(f, it.ready)
			factor := 1.0
			if slow.Factor != 1 && start >= at {
				factor = slow.Factor
			}
			if end := start + per + it.time*speeds[i]*factor; end < bf {
				bi, bs, bf = i, start, end
			}
		}
		if it.crashes == 0 {
			free[bi] = bf
			continue
		}
		half := (bf - bs) / 2
		free[bi] = bs + half + d
		it.crashes--
		it.ready = bs + math.Max(half, lease)
		i, _ := slices.BinarySearchFunc(retries, it, func(a, b packed) int { return cmp.Compare(a.ready, b.ready) })
		retries = slices.Insert(retries, i, it)
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
