// Package work holds the units of APF accounting: seat-seconds, the work
// estimate of one request, and the estimator that derives an estimate from a
// request's verb, list options and the caller-supplied object and watch counts.
//
// Seat-seconds (spec docs/flowcontrol.md, reference §1.1) are a fixed-point
// uint64 with one unit = 1e-8 seat-seconds, exactly as in kube-apiserver, so
// the progress meter of a queue set has the same range (about 1.8e11 ss) and
// the same epoch-advance points.
//
// A request holds MaxSeats = max(InitialSeats, FinalSeats) for its whole life:
// the initial phase (length unknown in advance, guessed as G) and the final
// phase of AdditionalLatency. Its work is InitialSeats×G + FinalSeats×latency.
//
// The estimator follows reference §5: lists and watches are charged by the
// size-based (default) or count-based formula, mutating requests by the number
// of watchers they will notify, everything else one seat.
package work
