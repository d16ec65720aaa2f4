// Package queueset implements fair queuing with seats for one priority level,
// behaving like kube-apiserver's fairqueuing/queueset (reference §1).
//
// # Model
//
// A queue set has a concurrency limit C in seats and, unless it is exempt or
// in Reject mode, a fixed number of FIFO queues. A request carries a work
// estimate: InitialSeats held while it executes, FinalSeats held for
// AdditionalLatency afterwards, and it holds MaxSeats for its whole life. Its
// work is InitialSeats×G + FinalSeats×AdditionalLatency, G = 3 ms.
//
// Arrival picks a queue by shuffle sharding (the hand of the flow's hash,
// visited from a rotating offset, least waiting work wins) and rejects with
// queue-full only if all C seats are in use and that queue holds
// QueueLengthLimit requests. Dispatch happens in virtual time: the progress
// meter R advances at min(seats requested, C)/active queues per second, each
// queue dispatches its head at nextDispatchR, and the head with the smallest
// nextDispatchR + work goes next (ties round-robin from the last queue
// served). If that head does not fit, nothing is dispatched (head-of-line
// blocking). A request wider than C runs alone. On finish, nextDispatchR is
// corrected by InitialSeats×(actual service time − G); final seats are
// released by the clock after AdditionalLatency. The floor nextDispatchR ≥
// head.arrivalR limits windup. Virtual finish times are computed from
// nextDispatchR rather than stored, so a correction of one request shifts all
// later ones of its queue.
//
// The unfairness bound of ordinary fair queuing carries over: a queue's
// service diverges from the ideal by at most C requests.
//
// # Invariants
//
// CheckInvariants verifies them; tests run it after every step:
//   - a dispatch never raises seats in use above C unless the request runs
//     alone (too wide, possibly beside lingering final seats);
//   - the totals equal the sums over queues and requests;
//   - R does not decrease within an epoch; every waiting head has
//     nextDispatchR ≥ its arrivalR.
//
// # Deviations from upstream, each with a test (see docs/flowcontrol.md)
//
//   - Seats waiting are decremented by the seats that were added at enqueue,
//     not by the seats after the final-seat clamp, so the seat demand does not
//     drift upwards (TestSeatsWaitingAfterFinalClamp; upstream reference §1.12 item 1).
//   - A surplus queue is removed only when it also holds no lingering seats,
//     so a late release never removes a queue twice or the wrong one
//     (TestQueueRemovalWaitsForLingeringSeats; upstream PR #140885).
//   - With C = 0 a non-exempt level admits nothing: the too-wide exception
//     needs C > 0 (TestZeroLimitAdmitsNothing; upstream #134196).
//   - StartRequest blocks for the decision and Finish only runs the work;
//     upstream's Finish waits. Cancellation is an explicit call or a ctx end.
//   - Dump.LastDispatch keeps what upstream publishes at each dispatch from a
//     queue (R, S and the S bounds), with nextDispatchR − seatsInUse×G signed
//     where upstream's unsigned arithmetic wraps (TestLastDispatch; compared
//     with upstream's gauges by the conformance traces).
//
// Methods whose names end in Locked need qs.mu held; fields declared after mu
// are guarded by it.
package queueset
