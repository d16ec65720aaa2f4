// Package hpa is a KEDA/HPA-style baseline, for comparisons: the queue-length
// scaler of KEDA (nats-jetstream lag with an AverageValue target) run through
// the Kubernetes HPA algorithm (reference peers.md §1–2; docs/control.md).
//
// For each fresh sample, with lag = queue length + in flight and r the
// replicas last asked for:
//
//	desired = ceil(lag / target)                   (External metric, AverageValue)
//	desired = r   when |lag/(target·r) − 1| ≤ tolerance          (dead-band, 0.1)
//	up   = min of the recommendations in the scale-up window      (0 s: the latest)
//	down = max of the recommendations in the scale-down window    (300 s)
//	new  = up if r < up; down if down < r; else r
//	rate limits against the replicas in effect one period (15 s) ago, p:
//	       up to max(p + 4, 2·p), down to p − 100 %·p
//	new  = clamp(new, min, max)
//
// These are the HPA defaults (k8s pkg/apis/autoscaling/v2/defaults.go) and
// KEDA's default lagThreshold of 10. The HPA's sync period (15 s) or KEDA's
// polling interval (30 s) is the job's check_interval, applied by the caller.
// The baseline has no notion of a deadline: it drains the queue as fast as the
// target allows and keeps replicas for the scale-down stabilization window.
package hpa
