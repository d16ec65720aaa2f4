// Package apf puts API Priority and Fairness in front of requests: a Gate
// classifies a request's attributes with the live policy
// (flowcontrol/policy), estimates its work, admits it through the
// fair-queuing engine (flowcontrol) and records kube-apiserver's metrics.
// It knows no transport: flowcontrol/apfhttp puts a Gate in front of an
// HTTP handler, and the bus gate stage (stages/gate) in front of the
// infrastructure requests on NATS.
//
// A Gate is safe for concurrent use. Reconfigure swaps the policy and the
// engine atomically: requests already queued or executing finish in the
// engine that admitted them (nothing is dropped), new ones use the new one.
//
// See docs/flowcontrol.md for the configuration, the defaults and the three
// gates built on this package (HTTP filter, pace gate proxy, bus stage).
package apf
