package apf

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// newTerminations is kube-apiserver's apiserver_request_terminations_total:
// requests the server refused in self-defense, here the 429s of APF and of
// the max-in-flight limits.
func newTerminations() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "request_terminations_total",
		Help: "Number of requests which apiserver terminated in self-defense."},
		[]string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"})
}

// Termination is a request refused in self-defense, with the labels kube's
// request metrics give it: the verb as they report it, the resource (or,
// for a non-resource request, the path as Subresource) and the scope.
type Termination struct {
	Verb, Group, Version, Resource, Subresource, Scope string
	Code                                               int
}

// Terminated counts t in apiserver_request_terminations_total.
func (m *Metrics) Terminated(t Termination) {
	if m == nil {
		return
	}
	m.terminations.WithLabelValues(t.Verb, t.Group, t.Version, t.Resource, t.Subresource, t.Scope, "apiserver",
		strconv.Itoa(t.Code)).Inc()
}
