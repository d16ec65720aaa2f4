package work

import (
	"errors"
	"math"
)

func (e *Estimator) list(r *Request, priorityLevel string) Estimate {
	minSeats := e.cfg.MinimumSeats
	maxSeats := e.capFor(priorityLevel, e.cfg.MaximumListSeatsLimit)
	if r.InvalidListOptions {
		return Estimate{InitialSeats: maxSeats}
	}
	if r.Verb == "watch" {
		initialEvents := r.SendInitialEvents != nil && *r.SendInitialEvents
		legacy := r.ResourceVersion == "" || r.ResourceVersion == "0"
		if !initialEvents && !legacy {
			return Estimate{InitialSeats: minSeats}
		}
	}
	fromCache := r.Verb == "watch" || !e.listFromStorage(r)
	stats, err := e.objects.ObjectStats(r.APIGroup, r.Resource)
	switch {
	case err == nil:
	case errors.Is(err, ErrObjectCountNotFound):
		return Estimate{InitialSeats: minSeats}
	default: // stale or unexpected: assume the worst
		stats = Stats{ObjectCount: staleObjectCount, AverageObjectSizeBytes: unknownObjectSizeBytes}
	}
	var seats int64
	if e.cfg.SizeBased {
		seats = seatsBySize(stats, r, fromCache)
	} else {
		seats = seatsByCount(stats, r, fromCache, e.cfg.ObjectsPerSeat)
	}
	return Estimate{InitialSeats: int(min(max(seats, int64(minSeats)), int64(maxSeats)))}
}

// listFromStorage reports whether a list bypasses the watch cache.
func (e *Estimator) listFromStorage(r *Request) bool {
	switch r.ResourceVersionMatch {
	case "NotOlderThan":
		return false
	case "":
		switch {
		case r.Continue != "":
			return true
		case r.Limit > 0 && r.ResourceVersion != "" && r.ResourceVersion != "0":
			return true
		case r.ResourceVersion == "":
			return !e.cfg.ConsistentReadFromCache
		}
		return false
	}
	return true // Exact and unknown matches go to storage
}

func limited(stats Stats, r *Request) int64 {
	if r.Limit > 0 && r.Limit < stats.ObjectCount {
		return r.Limit
	}
	return stats.ObjectCount
}

func seatsBySize(stats Stats, r *Request, fromCache bool) int64 {
	if stats.AverageObjectSizeBytes <= 0 && stats.ObjectCount != 0 {
		stats.AverageObjectSizeBytes = unknownObjectSizeBytes
	}
	n := limited(stats, r)
	var loaded int64
	switch {
	case r.Name != "":
		loaded = 1
	case fromCache:
		loaded = n
	case r.FieldSelector != "" || r.LabelSelector != "":
		loaded = max(n, stats.ObjectCount/2)
	default:
		loaded = n
	}
	bytes := loaded * stats.AverageObjectSizeBytes
	if fromCache {
		bytes = min(bytes, cacheMaxBytes)
	}
	return int64(math.Ceil(float64(bytes) / bytesPerSeat))
}

func seatsByCount(stats Stats, r *Request, fromCache bool, perSeat float64) int64 {
	n := limited(stats, r)
	var objects int64
	switch {
	case r.Name != "":
		objects = 1
	case fromCache:
		objects = stats.ObjectCount
	case r.FieldSelector != "" || r.LabelSelector != "":
		objects = stats.ObjectCount + n
	default:
		objects = 2 * n
	}
	return int64(math.Ceil(float64(objects) / perSeat))
}
