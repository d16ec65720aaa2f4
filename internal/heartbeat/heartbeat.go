// Package heartbeat spreads the periodic work of many idle jobs (a sample, a
// check) evenly over its period, whenever the jobs started: a thousand jobs
// submitted together then cost the same in every minute, rather than a burst
// once a period.
package heartbeat

import "hash/fnv"

// Next is the ticks from tick now to the next tick t of job id's phase,
// (t + hash(id)) mod every = 0, and at least every/2, so that a job's beats
// are every ticks apart on average and its first one is not at once. every
// must be positive.
func Next(id string, now uint64, every int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	w := uint64(every)
	left := int((w - (now+uint64(h.Sum32()))%w) % w)
	if left < every/2 {
		left += every
	}
	return left
}
