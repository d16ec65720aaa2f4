package apfhttp

import (
	"net/http"
	"slices"
	"strings"

	"github.com/pace-platform/pace/flowcontrol/apf"
)

// terminated counts r, refused with code, in m.
func terminated(m *apf.Metrics, r *http.Request, ri RequestInfo, code int) {
	scope := requestScope(ri)
	t := apf.Termination{Verb: reportedVerb(r, ri, scope), Scope: scope, Code: code}
	if ri.IsResourceRequest {
		t.Group, t.Version, t.Resource, t.Subresource = ri.APIGroup, ri.APIVersion, ri.Resource, ri.Subresource
	} else {
		t.Subresource = ri.Path
	}
	m.Terminated(t)
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
