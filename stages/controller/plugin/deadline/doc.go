// Package deadline is Pace's own controller, the default for native job specs:
// it sizes the worker pool from the measured per-replica throughput so that a
// batch job finishes by its deadline (or a streaming job keeps up with its
// arrivals), then smooths the result the way the HPA does (docs/control.md).
//
// # Throughput model
//
// The per-replica rate μ (items/s) is a ratio of exponentially decayed sums
// over the fresh samples, with time constant rate_window τ:
//
//	items ← items·e^(−Δt/τ) + Δfinished
//	busy  ← busy·e^(−Δt/τ)  + Δt·(b₀ + b₁)/2,   b = min(replicas, in_flight)
//	μ = items / busy
//
// While a scale-up is pending, an interval over which the live replica count
// changed is skipped (replicas that joined part-way would bias it). b counts busy workers, so idle replicas at the tail or under light streaming
// load do not dilute the rate; the ratio of sums is robust to heavy-tailed item
// times. A job's forecast item time (plugin.Job.ItemTime: a hint or the
// history of its program) seeds the sums with items at that time, so the
// first intervals refine it: 10 for a hint, the history's own items
// (plugin.Job.Samples) bounded to [10, 100] for a history, 100 being where
// the manager's confidence turns high. The same sums over a quarter of τ detect a
// change of pace: once they hold 10 items and their rate is more than 1.3×
// off the long one either way, the long sums restart from them. Without one, before a steady interval has been
// measured μ is prior_rate, or unknown (then the controller holds the current count): the processor's
// per_replica is not used, as its window spans replicas still starting.
//
// # Batch: feed-forward
//
// With R items unfinished, T = expected·(1 − time_progress) the time left,
// c live replicas, k replicas asked for but not yet live, d the start-up delay:
//
//	late  = max(0, −error − max(d, L)/expected),   L: when the first rate was measured
//	slack = margin + min(max_correction, lateness_gain·late)
//	T'    = T·(1 − slack) − 1/μ             (the last item must also finish)
//	need  = R/μ  replica-seconds
//	n     = ceil(need/T')                                if c·T' ≥ need
//	n     = c + k + ceil((need − c·T' − k·(T' − d)) / (T' − d))   otherwise
//
// A batch job is never scaled down before its queue is about to run dry: a busy replica
// costs only the work it does, which is the same whoever does it, so an early
// release saves nothing and may cost a start-up later (this also rules out
// oscillation). While the replicas of an earlier scale-up are still starting,
// no more are added, not even max (a rate measured over a few items is
// noisy): the controller waits for them, then sizes again. New replicas only work T' − d,
// so the start-up delay is paid for explicitly.
// The lateness correction is the bounded integral-like term: the later the job
// already is (error < 0, Asperathos' sign) beyond what learning the rate
// explains (the job is behind the diagonal until the first rate is measured,
// and the feed-forward plans for that), the more slack is planned. When
// T' ≤ d new replicas would arrive too late; when T' ≤ 0 the deadline is lost:
// in both cases, and when n exceeds max, the controller asks for max at once
// (least lateness) and says so.
//
// # Streaming: feed-forward (Flink/DS2)
//
//	n = ceil((input_rate + backlog/catch_up) / μ)
//
// # Smoothing (HPA idioms)
//
//   - stabilization windows per direction: a scale-up follows the minimum of the
//     recommendations within scale_up_window (0: at once), a scale-down the
//     maximum within scale_down_window;
//   - dead-band: a scale-down saving less than tolerance_down of the replicas is
//     skipped (scale-ups have no dead-band by default: they protect the deadline);
//   - rate limits per decision: up by at most max(max_up_pods, r·max_up_percent),
//     down by at most ceil(r·max_down_percent).
//
// # Scale-in as the queue runs dry
//
// With g the shorter of the last two gaps between decisions (the next one is
// expected as far; a single pause does not set the pace), Q items
// queued and c live replicas, the queue empties before the next decision when
// Q < c·μ·g; the replicas beyond those taking its last items would idle until
// then. The controller asks at once for keep = max(1, ceil(Q/(μ·g)),
// ceil(need/T')) when that is fewer than r: the others finish the item they
// hold and exit.
//
// # Start-up delay
//
// Measured from a scale-up (or the job's start) to its first replica live,
// taken midway between the sample that shows it and the one before; until
// then the forecast's start-up when it comes from history, else startup_delay.
//
// # The tail never strands items
//
// Once the queue is empty only in-flight items remain; replicas beyond them are
// idle, so the controller asks for max(1, min(r, in_flight)) at once (no
// window, no limit): idle replicas are released, busy ones never. While items
// remain the controller never asks for fewer than one replica.
//
// State (serializable): the last sample acted on, the decayed sums, the last
// scale-up time (to know how far the starting replicas are) and the recent
// recommendations.
package deadline
