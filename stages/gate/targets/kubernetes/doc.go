// Package kubernetes runs a job's workers as a Kubernetes batch/v1 Job.
//
// The Job, named pace-<job> in the job's namespace, runs the job's image
// and command with PACE_NATS_URL and PACE_JOB in its environment; its pods
// are workers of Pace's queue (the SDK or `pace worker`) and exit 0 on
// SIGTERM. With Config.WorkerSecret the pods also get the NATS settings
// that `pace worker` reads, from that Secret in the job's namespace:
// PACE_NATS_USER and PACE_NATS_PASSWORD by secretKeyRef, and the CA,
// credentials, nkey and client certificate files from a read-only Secret
// volume at CredentialsDir, with PACE_NATS_CA (…) naming them. The pods
// reference the Secret; the runtime never reads it, so no secret value is
// in the Job, and the gate needs no right on Secrets. With Config.JobToken
// (a bus that authenticates workers by their job's token, as
// deploy/kubernetes runs it) the pods get PACE_TOKEN in their template,
// and the Secret holds only the CA (and a client certificate).
//
// Worker pods meet the restricted Pod Security Standard: they run as
// WorkerUID (non-root, also their fsGroup), with the RuntimeDefault
// seccomp profile, no privilege escalation, every capability dropped, a
// read-only root filesystem with an emptyDir on /tmp, and no
// ServiceAccount token. The spec's resources become the container's
// requests and limits.
//
// Scaling patches spec.parallelism (Jobs have no scale subresource); the
// first scale creates the Job. A pod failure policy ignores pods ended by
// disruptions, and pods that exit 0 after SIGTERM count as successes, so
// scale-downs are never failures. Terminate deletes the Job with
// foreground propagation. Conflicts, throttling (429, at least its
// Retry-After), server errors, timeouts and broken connections are retried
// with exponential backoff, each attempt bounded; both calls are
// idempotent, so a write whose response was lost is simply repeated (a
// create that finds its own Job patches it). Each retry is reported in the
// request's outcome (targets.NoteRetry).
package kubernetes
