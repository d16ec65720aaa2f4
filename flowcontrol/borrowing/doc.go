// Package borrowing computes the concurrency limits of priority levels and
// lets busy levels borrow seats that idle ones can lend (reference §4).
//
// From the server's total concurrency limit ServerCL and each level's
// nominal concurrency shares NCS:
//
//	NominalCL   = ceil(ServerCL × NCS / ΣNCS)
//	LendableCL  = round(NominalCL × lendablePercent / 100)
//	BorrowingCL = round(NominalCL × borrowingLimitPercent / 100), or ServerCL if unlimited
//	MinCL = NominalCL − LendableCL,  MaxCL = NominalCL + BorrowingCL
//
// Every adjustment period (10 s) each level's seat-demand statistics are
// folded into a smoothed demand, smoothed = max(env, A×smoothed + (1−A)×env)
// with env = average + standard deviation and A = 0.977 (half-life ≈ 5 min).
// Exempt levels take max(MinCL, high watermark) off the top. Non-exempt levels
// get, depending on what remains: just MinCL; MinCL plus a common fraction of
// their demand above it; or the fair allocation of Allocate between
// max(MinCL, min(NominalCL, high watermark)) and MaxCL with target
// max(lower bound, smoothed demand).
//
// Allocate is an exact water-filling: it finds the unique fairProp with
// Σ clamp(fairProp × target_i, lb_i, ub_i) = required, sweeping the sorted
// relative bounds in O(n log n). The conformance module checks it against
// kube-apiserver on 10,000 random problems within 1e-10.
//
// Kept as upstream on purpose: the fair allocation is asked to sum to the
// sum of nominal limits, not to that sum minus what exempt levels take
// (reference §1.12 item 3); Pace changes no allocation result, so limits stay
// comparable with a kube-apiserver's.
package borrowing
