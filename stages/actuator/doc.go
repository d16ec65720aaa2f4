// Package actuator turns scaling decisions and job lifecycle events into
// infrastructure requests, which the APF gate admits and executes.
//
// Data flow:
//
//	pace.decisions.<job> ─┐
//	pace.jobs.<job>.*  ───┴─► Stage ──► pace.k8s.requests ──► gate (APF) ──► targets.Executor ──► runtime
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
// The gate admits the requests and executes them on the jobs' targets
// (package stages/gate/targets).
package actuator
