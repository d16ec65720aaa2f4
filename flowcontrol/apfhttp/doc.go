// Package apfhttp puts an apf.Gate in front of an HTTP handler, as
// kube-apiserver's filters do: Middleware classifies, queues and admits
// each request (429 with Retry-After when rejected; kube's two max-inflight
// limits when APF is disabled), Resolvers turn an *http.Request into the
// attributes APF classifies on (KubeResolver for Kubernetes API paths,
// Resources for route-based APIs such as Pace's own), ReadBody reads a
// body whole before its request may queue, so a slow client holds a
// connection and never a seat, and DebugHandler serves kube's
// /debug/api_priority_and_fairness/ dumps. It reads callers from
// auth.FromContext.
package apfhttp
