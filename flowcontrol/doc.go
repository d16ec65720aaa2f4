// Package flowcontrol is Pace's implementation of Kubernetes API Priority and
// Fairness (APF): requests are sorted into priority levels, each level has a
// concurrency limit in seats that levels can lend to each other, and within a
// level flows share the seats through fair queuing with shuffle sharding.
//
// This package is the small public face of the engine. Controller holds the
// priority levels; StartRequest admits a request (possibly after waiting in a
// queue) or rejects it with a *RejectedError carrying the reason and a
// Retry-After hint; Request.Finish runs the work and frees the seats. The
// engine does no I/O and reads time only from the injected clock.
//
// The algorithms live in sub-packages, each with its own doc.go:
// queueset (fair queuing), shufflesharding (dealing hands of queues),
// borrowing (limits and the water-filling allocator), work (seat-seconds and
// the work estimator), retryafter, integrator and eventclock. See
// docs/flowcontrol.md for the model and every deviation from kube-apiserver.
package flowcontrol
