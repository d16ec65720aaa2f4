// Package processor turns a job's raw samples (pace.metrics.<job>.raw) into
// progress metrics (pace.metrics.<job>.progress).
//
// The math is pure: Tracker.Observe takes a sample and returns the progress
// at the sample's time, so tests drive it with samples whose At is a fake
// clock. Formulas (docs/monitoring.md lists every metric):
//
//	finished       = done + dead                   (items that left the queue for good)
//	job_progress   = min(1, finished / total)      (0 stays 0)
//	time_progress  = (at - started) / (deadline - started), sub-second, not capped
//	error          = job_progress - time_progress  (negative = late; Asperathos' sign)
//	throughput     = Δfinished / Δt over the last Window (the job's start counts as a
//	                 point with nothing finished, so the first sample has a rate)
//	per_replica    = throughput / replicas
//	eta            = (total - finished) / throughput
//	replicas_needed = ceil((total - finished) / (per_replica · (deadline - at)))
//	streaming: input_rate = Δpublished/Δt, output_rate = throughput,
//	           backlog = pending + in_flight, lag = at - oldest,
//	           error = output_rate - input_rate    (Asperathos' simulator)
//
// Deliberate divergences from Asperathos' kubejobs monitor (reference
// asperathos.md §5.3, §11):
//   - Finished items are counted (results + dead letters), not derived as
//     N − (queued + processing): items not queued yet do not count as done.
//     With a consistent sample both agree (N = 1500, 5 queued, 10 processing → 1485).
//   - A progress of 0 is 0; Asperathos reused the previous value.
//   - Elapsed time has sub-second resolution and does not wrap at one day
//     (Asperathos used timedelta.seconds).
//   - Samples older than the last one seen are ignored (ErrStale), so a
//     redelivered sample cannot make a rate negative.
package processor
