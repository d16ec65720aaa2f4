// Package threshold is Asperathos' "default" scheduler, reproduced exactly
// (docs/control.md; reference asperathos.md §6.4): a bang-bang controller on
// the progress error e = job_progress − time_progress (negative = late).
//
// With r the current parallelism and s = actuation_size, for each fresh sample:
//
//	e > 0 and e ≥ trigger_down       → max(r − s, min_rep)
//	e < 0 and |e| ≥ trigger_up       → min(r + s, max_rep)
//	otherwise                        → no action (r)
//
// With triggers 0 every non-zero error moves the replicas by s each sample;
// an error of exactly 0 never does.
//
// Invariants and semantics kept from Asperathos:
//   - a sample is acted on only if it is newer than the last one acted on
//     (plugin.ErrStale otherwise), so the controller moves at most once per
//     monitor sample however often it is asked;
//   - r is the parallelism last asked for (Asperathos reads Job.spec.parallelism,
//     not the running pods), so steps accumulate while workers start up; before
//     the first decision it is the job's initial replicas, else the observed count.
//
// Divergences: min_rep and max_rep default to the job spec's replicas.min and
// replicas.max; Asperathos required them among the control parameters.
package threshold
