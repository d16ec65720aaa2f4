package apf

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

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

// terminated counts r, refused with code, with kube's labels: the verb as
// its request metrics report it, the resource (or, for a non-resource
// request, the path as subresource) and the scope.
func (m *Metrics) terminated(r *http.Request, ri RequestInfo, code int) {
	if m == nil {
		return
	}
	scope := requestScope(ri)
	verb := reportedVerb(r, ri, scope)
	if ri.IsResourceRequest {
		m.terminations.WithLabelValues(verb, ri.APIGroup, ri.APIVersion, ri.Resource, ri.Subresource, scope, "apiserver", strconv.Itoa(code)).Inc()
		return
	}
	m.terminations.WithLabelValues(verb, "", "", "", ri.Path, scope, "apiserver", strconv.Itoa(code)).Inc()
}

// requestScope is kube's CleanScope: resource, namespace, cluster or "".
func requestScope(ri RequestInfo) string {
	switch {
	case ri.Name != "" || ri.Verb == "create":
		return "resource"
	case ri.Namespace != "":
		return "namespace"
	case ri.IsResourceRequest:
		return "cluster"
	}
	return ""
}

// reportedVerb is the verb kube's request metrics report: the method, GET of
// a collection as LIST, a ?watch=true GET as WATCH, a server-side apply
// PATCH as APPLY, a connect subresource as CONNECT, anything else "other".
func reportedVerb(r *http.Request, ri RequestInfo, scope string) string {
	verb := strings.ToUpper(r.Method)
	if (verb == http.MethodGet || verb == http.MethodHead) && scope != "resource" && scope != "" {
		verb = "LIST"
	} else if verb == http.MethodHead {
		verb = http.MethodGet
	}
	if w := r.URL.Query()["watch"]; (verb == http.MethodGet || verb == "LIST") && len(w) > 0 && w[0] != "0" && !strings.EqualFold(w[0], "false") {
		verb = "WATCH"
	}
	if verb == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml" {
		verb = "APPLY"
	}
	if ri.IsResourceRequest && slices.Contains([]string{"log", "exec", "portforward", "attach", "proxy"}, ri.Subresource) {
		verb = "CONNECT"
	}
	if !slices.Contains([]string{"APPLY", "CONNECT", "CREATE", "DELETE", "DELETECOLLECTION", "GET", "LIST", "PATCH", "POST",
		"PROXY", "PUT", "UPDATE", "WATCH", "WATCHLIST"}, verb) {
		return "other"
	}
	return verb
}
