// Package apf puts API Priority and Fairness in front of requests: a Gate
// classifies a request with the live policy (flowcontrol/policy), admits it
// through the fair-queuing engine (flowcontrol), and records metrics; the
// HTTP filter (Gate.Middleware) and resolvers that turn an *http.Request into
// request attributes (KubeResolver for Kubernetes API paths, Resources for
// route-based APIs such as Pace's own) build on it. ReadBody goes in front
// of the filter: a request queues for a seat only once its whole body is
// in, so a slow client holds a connection, never a seat.
//
// A Gate is safe for concurrent use. Reconfigure swaps the policy and the
// engine atomically: requests already queued or executing finish in the
// engine that admitted them (nothing is dropped), new ones use the new one.
//
// See docs/flowcontrol.md for the configuration, the defaults and the three
// gates built on this package (HTTP filter, pace gate proxy, bus stage).
package apf
