// Package sim is a deterministic discrete-event simulator of a Pace job: a
// queue of items, worker replicas, the monitor and the controller, driven by
// the same controller plugins as the controller stage (docs/controllers.md).
//
// # Model
//
// Time is virtual (time.Duration from the job's start; no clock is read) and
// events are ordered by time, then by creation order, so a run is a pure
// function of its scenario and seed. Randomness comes from math/rand/v2 PCG
// streams seeded with (seed, k): k = 1 item service times (drawn up front for a
// batch job, so every controller sees the same items and the oracle knows
// them), 2 failures, 3 arrivals and streaming service times, 4 per-replica
// speeds, 5 the oracle's failures.
//
//   - Items: service time constant, exponential, lognormal (given mean and
//     sigma), Pareto (given mean and tail index alpha) or bimodal (a slow
//     fraction slow_factor times longer, same mean); optionally × a
//     per-replica speed (lognormal, mean 1; a straggler replica is
//     straggler_factor times slower still) and × a slowdown factor for items
//     started after a given time.
//   - Queue: FIFO; redeliveries go to its head. An optional serial dispatch
//     time per item models a shared bottleneck (Asperathos' flattening curve).
//   - Workers: a replica asked for starts after the start-up delay, then takes
//     items one at a time (plus a per-item overhead). With failure_rate an
//     attempt crashes its worker half-way: the item returns when its lease
//     expires and the worker restarts (start-up again). A replica asked to stop
//     stops at once if starting or idle; if busy it drains (finishes its item,
//     SIGTERM-graceful) and then exits. Scale-down picks starting, then idle,
//     then busy replicas.
//   - Monitor: every monitor_period the queue is sampled into a
//     schemas.Sample and turned into a schemas.Progress with the processor's
//     formulas (rates over rate_window); Replicas counts live workers only.
//   - Controller: called with each progress message, at most once per
//     check_interval; a changed count is applied after actuation_delay,
//     bounded by replicas.min and replicas.max.
//   - Batch jobs end when every item is done (deadline met if by the
//     deadline), or at the horizon. Streaming jobs end after duration; their
//     objective is the p99 of item latency (arrival to done, items still queued
//     counted with their wait so far) against latency_target.
//
// A job runs as its program's first (Run: no forecast) or as a later one
// (RunLater, and every controller in Compare): admission forecasts its item
// time and start-up, as the manager does from the bucket pace_item_times,
// from five earlier jobs of the program, other draws of the scenario run
// with the deadline controller (the history: mean item time, start-up from
// the start to the first result less one item time, items seen).
//
// Cost is replica-seconds: the sum over replicas of the time from being asked
// for (start-up included) to exiting, or to the job's end. Of it, CrashSeconds
// is the time lost to crashes: each crashed attempt and the restart after it.
//
// # Oracle
//
// For a batch scenario, Oracle computes the cheapest schedule that meets the
// deadline D with perfect knowledge of every item's service time. A replica
// started at 0 is ready at the start-up delay d and, in an optimal schedule,
// works without idling until its last item and then exits, so a schedule with
// n replicas costs n·d + W, where W is the items' total busy time. The oracle
// therefore looks for the least n whose items fit: for each n from min to max
// it packs the items longest-first, each onto the replica that would finish it
// earliest (LPT, with the replica speeds and the slowdown), and keeps the
// cheapest n whose makespan is at most D. With identical replicas and no
// slowdown this is n·d + W for the least n LPT can pack, and no schedule with
// fewer replicas exists unless LPT's packing is loose (LPT's makespan is
// within 4/3 of the optimum; with many small items it is exact in practice).
// OracleResult.LowerBound is the fluid bound ceil(W/(D−d))·d + W, which no
// schedule can beat. With failures the oracle meets crashes too, as every
// schedule must: attempts crash with the scenario's failure_rate (PCG stream
// 5, drawn in packing order, the same for every n), each costing its replica
// half the attempt and a restart, its item packed again once the lease
// expires. Knowing which attempts crash does not let a schedule avoid them,
// so the oracle pays the crashes' cost rather than being a bound no
// controller could reach. A scenario is feasible when some n ≤ max meets D.
//
// Tests pin the oracle on hand-computed cases, determinism (same seed,
// byte-identical output) and the headline figures published in
// docs/controllers.md.
package sim
