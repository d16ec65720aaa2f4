package apfhttp

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// RequestInfo is what a Resolver learns from an *http.Request: the request
// attributes APF classifies on (kube's RequestInfo), without the user.
type RequestInfo struct {
	IsResourceRequest bool
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection for resource requests; the lower-case method otherwise.
	Verb        string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Path        string
	// LongRunning requests other than watches (exec, attach, port-forward,
	// proxy, log) bypass APF, as in kube-apiserver.
	LongRunning bool
}

// Resolver maps an HTTP request to request attributes.
type Resolver func(r *http.Request) RequestInfo

// IsWatch reports whether the request is a watch (admitted by APF, its
// execution ending when the response starts).
func (ri RequestInfo) IsWatch() bool { return ri.IsResourceRequest && ri.Verb == "watch" }

// IsReadOnly reports whether the request counts as read-only for the
// max-inflight limits and metrics (get, list, watch).
func (ri RequestInfo) IsReadOnly() bool {
	switch ri.Verb {
	case "get", "list", "watch", "head", "options":
		return true
	}
	return false
}

var longRunningSubresources = []string{"attach", "exec", "proxy", "log", "portforward"}

// KubeResolver parses Kubernetes API paths as kube-apiserver's RequestInfo
// factory does:
//
//	/api/{version}/[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]
//	/apis/{group}/{version}/[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]
//	/api/{version}/watch/... (deprecated watch paths)
//
// GET without a name is list, or watch with ?watch=true (any value but
// false or 0), named by a fieldSelector on metadata.name if it has one;
// DELETE without a name is deletecollection; /api/v1/namespaces/{ns} is the
// namespace itself; methods other than GET, HEAD, POST, PUT, PATCH and DELETE
// have the verb "". Everything else is a non-resource request whose verb is
// the lower-case method; /debug/pprof/ ones are long-running.
// FuzzKubeResolverMatchesKube (flowcontrol/conformance) compares it with
// kube-apiserver's RequestInfoFactory.
func KubeResolver(r *http.Request) RequestInfo {
	ri := RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		ri.APIVersion, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		ri.APIGroup, ri.APIVersion, parts = parts[1], parts[2], parts[3:]
	default:
		ri.LongRunning = strings.HasPrefix(ri.Path, "/debug/pprof/") // profiles take seconds, as in kube-apiserver
		return ri
	}
	ri.IsResourceRequest = true
	ri.Verb = resourceVerb(r.Method)
	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			return RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
		}
		ri.Verb, parts = parts[0], parts[1:]
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		ri.Namespace = parts[1]
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	if len(parts) >= 3 && ri.Verb != "proxy" {
		ri.Subresource = parts[2]
	}
	if len(parts) >= 2 {
		ri.Name = parts[1]
	}
	ri.Resource = parts[0]
	if ri.Name == "" {
		switch ri.Verb {
		case "get":
			ri.Verb = "list"
			q := r.URL.Query()
			if watchParam(q) {
				ri.Verb = "watch"
			}
			if name, ok := selectedName(q); ok {
				ri.Name = name
			}
		case "delete":
			ri.Verb = "deletecollection"
		}
	}
	ri.LongRunning = ri.Verb == "watch" || ri.Verb == "proxy" || slices.Contains(longRunningSubresources, ri.Subresource)
	return ri
}

func resourceVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "" // kube-apiserver's verb for other methods: only "*" rules match it
}

// watchParam reports whether a query asks for a watch as kube-apiserver
// reads it: a watch parameter whose first value is neither "0" nor "false".
func watchParam(q url.Values) bool {
	w := q["watch"]
	return len(w) > 0 && w[0] != "0" && !strings.EqualFold(w[0], "false")
}

// selectedName returns the object a list is narrowed to by a fieldSelector
// requiring metadata.name, as kube-apiserver reads it (so that the list is
// estimated as one object): only when its list options all parse and the
// name is a valid path segment.
func selectedName(q url.Values) (string, bool) {
	for _, k := range []string{"limit", "timeoutSeconds"} {
		if v := q[k]; len(v) > 0 {
			if _, err := strconv.ParseInt(v[0], 10, 64); err != nil {
				return "", false
			}
		}
	}
	if _, err := labels.Parse(q.Get("labelSelector")); err != nil {
		return "", false
	}
	sel, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return "", false
	}
	name, ok := sel.RequiresExactMatch("metadata.name")
	return name, ok && len(content.IsPathSegmentName(name)) == 0
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// PaceGroup is the API group of Pace's own HTTP API in FlowSchemas.
const PaceGroup = "pace.dev"

// Resources returns a route-based Resolver for a REST API that is not
// Kubernetes-shaped, such as Pace's: a path whose first segment is one of
// resources is a resource request in group,
//
//	/{resource}[/{name}[/{subresource}]]
//
// with verbs as in KubeResolver (GET without a name is list, or watch with
// ?watch=true). A ".json" at the end of the path names the same route
// (Pace's API, like Asperathos', serves /submissions.json as /submissions
// and /submissions/{id}.json as /submissions/{id}). Subresources exec,
// attach, proxy and portforward are long-running and bypass APF, and so is
// log when it follows (?follow=true): a log read that ends is an ordinary
// get. Every other path is a non-resource request (probes, /metrics,
// /debug/...), whose verb is the lower-case method but for HEAD, resolved
// as the GET it answers ("head" is no verb a FlowSchema can name, so a
// HEAD probe is exempt like a GET one). Pace's manager API uses
// apf.Resources(apf.PaceGroup, "submissions", "plugins").
func Resources(group string, resources ...string) Resolver {
	return func(r *http.Request) RequestInfo {
		parts := splitPath(strings.TrimSuffix(r.URL.Path, ".json"))
		if len(parts) == 0 || !slices.Contains(resources, parts[0]) {
			verb := strings.ToLower(r.Method)
			if r.Method == http.MethodHead {
				verb = "get"
			}
			return RequestInfo{Path: r.URL.Path, Verb: verb}
		}
		ri := RequestInfo{IsResourceRequest: true, APIGroup: group, Resource: parts[0], Verb: resourceVerb(r.Method), Path: r.URL.Path}
		if len(parts) >= 2 {
			ri.Name = parts[1]
		}
		if len(parts) >= 3 {
			ri.Subresource = parts[2]
		}
		if ri.Name == "" {
			switch ri.Verb {
			case "get":
				ri.Verb = "list"
				if watchParam(r.URL.Query()) {
					ri.Verb = "watch"
				}
			case "delete":
				ri.Verb = "deletecollection"
			}
		}
		// A watch holds no max-inflight slot for its whole life, as in KubeResolver.
		switch ri.Subresource {
		case "log":
			follow, _ := strconv.ParseBool(r.URL.Query().Get("follow"))
			ri.LongRunning = follow
		default:
			ri.LongRunning = ri.Verb == "watch" || slices.Contains(longRunningSubresources, ri.Subresource)
		}
		return ri
	}
}
