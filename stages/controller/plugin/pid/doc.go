// Package pid is Asperathos' "pid" scheduler, reproduced exactly
// (docs/control.md; reference asperathos.md §6.5).
//
// With e the progress error (job_progress − time_progress, negative = late),
// r the current parallelism and gains Kp, Ki, Kd, for each fresh sample:
//
//	P = −Kp·e
//	D = 0 on the first sample, else −Kd·(e − last_error)
//	integral += e;  I = −Ki·integral
//	action = trunc(P + D + I)            (toward zero)
//	new = clamp(r + action, min_rep, max_rep);  last_error = e
//
// Sums and differences are per sample, not per second (no time scaling), there
// is no anti-windup, and a decision is always returned, so each sample
// re-asserts the clamp. Because the error is a fraction in [−1, 1], small gains
// (Asperathos' 0.1) move nothing until the integral has grown: trunc(−0.1·Σe)
// is non-zero only once Σe ≤ −10 (with Kp's share added).
//
// As in the threshold scheduler, only samples newer than the last one acted on
// count (plugin.ErrStale otherwise; the integral is not advanced), and r is the
// parallelism last asked for (Job.spec.parallelism in Asperathos).
package pid
