// Package policy is the configuration layer of API Priority and Fairness:
// FlowSchema and PriorityLevelConfiguration objects of
// flowcontrol.apiserver.k8s.io/v1 (and the deprecated v1beta3, converted),
// read from multi-document YAML or JSON as kubectl apply takes them, with the
// API server's defaulting and validation (field paths included), the
// mandatory and suggested bootstrap objects, config maintenance, and
// classification of requests into a flow schema, a priority level and a flow.
//
// The rules followed are those of docs/flowcontrol.md and of the reference
// spec, sections 3 (classification), 4 (limits) and 6 (defaults).
// Classification is a pure function of a compiled Digest; a Digest is
// immutable and safe for concurrent use. The package does no I/O beyond the
// readers it is given.
package policy
