package work

import "math"

func (e *Estimator) mutating(r *Request, priorityLevel string) Estimate {
	minSeats := e.cfg.MinimumSeats
	if !e.cfg.MutatingEnabled || (r.Resource == "serviceaccounts" && r.Subresource == "token") {
		return Estimate{InitialSeats: minSeats}
	}
	maxSeats := e.capFor(priorityLevel, e.cfg.MaximumMutatingSeatsLimit)
	watches := e.watches.WatchCount(r)
	if watches < int(e.cfg.WatchesPerSeat) {
		return Estimate{InitialSeats: 1}
	}
	final := int(math.Ceil(float64(watches) / e.cfg.WatchesPerSeat))
	finalWork := SeatsTimesDuration(float64(final), e.cfg.EventAdditionalDuration)
	final = min(final, maxSeats)
	return Estimate{InitialSeats: 1, FinalSeats: final, AdditionalLatency: finalWork.DurationPerSeat(float64(final))}
}
