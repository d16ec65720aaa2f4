// Package actuator turns scaling decisions and job lifecycle events into
// infrastructure requests, and executes the requests the APF gate admits.
//
// Data flow:
//
//	pace.decisions.<job> ─┐
//	pace.jobs.<job>.*  ───┴─► Stage ──► pace.k8s.requests ──► gate (APF) ──► Executor ──► runtime
//
// A job without a worker spec (no exec, command or image: a queue whose
// workers its user runs, as pace push and pace worker create) is never
// actuated. For the others, the Stage publishes one schemas.KubeRequest per change of a job's desired
// replica count (decisions repeating the last request are skipped, zero
// included: a job idling at zero gets one request, not one per decision), a scale
// to the job's initial replicas when it starts, a scale to zero when it ends
// and a delete when it is terminated. Each request carries the job owner as
// its user and the job's namespace, so API Priority and Fairness classifies
// it like the Kubernetes call it stands for: verb patch on batch/jobs
// (subresource scale) or verb delete. On start the Stage reconciles: every
// ongoing job gets its last known replica count again, so a restarted Pace
// restarts the workers of running jobs. A request that was not applied (its
// outcome on pace.k8s.outcomes is rejected or failed) is asked again by the
// Stage itself after 1 s, doubling up to a minute while it keeps failing,
// unless a newer decision asked for something else meanwhile: controllers
// repeat an unchanged decision only once per heartbeat. A job that ended is
// forgotten.
//
// The Executor runs admitted requests with a runtime (the local process
// runtime, or Kubernetes) and, when the count changed from the job record's,
// publishes a scaled job event with the new count and updates the record.
// A scale that changed nothing is not announced: the collector would sample
// the job on it and the controller decide again, a loop (issue 19). A runtime that
// retries notes each retry (NoteRetry), and the request's outcome lists
// them in its reason, e.g. "2 retries (conflict 1, server error 1)".
package actuator
