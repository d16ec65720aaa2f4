// Package collector samples the queue state of every running job from the
// JetStream API and publishes it as schemas.Sample on pace.metrics.<job>.raw.
//
// Which jobs run comes from the jobs key-value bucket (a watch, no polling).
// A job is sampled:
//   - every Interval (default 1 s);
//   - at once on its lifecycle events, pace.jobs.<job>.* (start, stop, …),
//     and once more when its record reaches a final state; not on Pace's own
//     actuation (a scaled event, or a record update that changes only the
//     replica count), which the next interval sample sees: sampling on it
//     would make each decision's effect the cause of the next decision;
//   - on queue activity (an item pushed, a result or a dead letter stored),
//     at the next ActivityGap tick (default Interval/5), so a progress
//     message follows a queue change well within one interval.
//
// Lifecycle and activity samples go ahead of the interval's round of every
// job (when both wait, they alternate, so neither starves).
//
// A round costs one JetStream API request for all its jobs, the dead-letter
// stream's info filtered on pace.dead.* (one subject per job, so its
// per-subject counts are every job's dead letters), then two requests per
// job, issued by Concurrency goroutines at once, and an asynchronous publish:
//   - consumer info of work-<job> on the work stream: pending = NumPending,
//     in flight = NumAckPending, redelivered = NumRedelivered;
//   - consumer info of count-<job>-<nuid> on the results stream: a durable
//     push consumer filtered on pace.results.<job>.* whose deliver subject
//     no one subscribes to, so it delivers nothing and its NumPending is the
//     number of results (one subject per item, deduplicated, which a
//     subject-filtered stream info would list one by one). Its name is
//     unguessable and no one can fetch from it (see countConsumerPrefix).
//
// Done is capped by the items that left the queue (a batch job's total, a
// streaming job's entries in the ledger, less pending and in flight), so
// results for ids a job never queued move nothing before the manager sets
// them aside. Streaming jobs with results cost a third request, the count
// of their entries on pace.ledger.<job>.*, made as the results' count is; those with
// a backlog a fourth: the first stored message of pace.work.<job>, whose
// time is the oldest unfinished item's.
// The counting consumers are created on a job's first sample and deleted when
// the job ends or is deleted (and swept at start for jobs that ended while
// no collector ran). Replicas come from worker presence (bus.Presence).
package collector
