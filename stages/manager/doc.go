// Package manager is Pace's job manager: the Asperathos-compatible REST API
// (and the same operations over NATS on pace.submit and pace.control.*),
// job specs and their validation, the job lifecycle on the bus, reports,
// and the cluster and plugin registries.
//
// Lifecycle. Every transition is first published as an event on
// pace.jobs.<job>.<type>, then applied with compare-and-set to the job's
// record in the pace_jobs bucket; the record remembers the sequence of the
// last event it reflects, so on start-up Run replays the events the record
// missed (the event stream is the source of truth). States:
//
//	created → ongoing → completed | failed | stopped | terminated | error
//
// A batch job is completed when every item has a result, failed when every
// item has a result or a dead letter and some are dead. Stop drops the
// queued items (batch) or refuses new ones (streaming); the job is stopped
// once nothing is in flight (streaming: once its queue is drained too).
// Terminate releases the job's queue at once; actuators delete its workers
// on the terminated event. A finished job's resources are released
// (cleaned event) after its resources_lifetime.
//
// Stray items. Only created and ongoing jobs accept items, but NATS stores
// whatever a permitted client publishes on pace.work.<job>. SweepStrays
// (every Config.StraySweep, and when a job ends) moves the items of jobs
// that do not exist (after Config.StrayGrace) or are finished to their
// dead letters, reason refused; see strays.go.
//
// Validation happens before a job is accepted: every problem of a
// submission is reported at once with its field path, and nothing is
// written to the bus for a refused one (unlike Asperathos, which answers
// 202 and fails later). Workloads are loaded in order, blank lines
// skipped, a last line without a newline kept.
package manager
