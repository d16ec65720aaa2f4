package apf

import (
	"net/http"
	"slices"
	"strings"
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
// GET without a name is list, or watch with ?watch=true; DELETE without a
// name is deletecollection; /api/v1/namespaces/{ns} is the namespace itself.
// Everything else is a non-resource request whose verb is the lower-case method.
func KubeResolver(r *http.Request) RequestInfo {
	ri := RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		ri.APIVersion, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		ri.APIGroup, ri.APIVersion, parts = parts[1], parts[2], parts[3:]
	default:
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
			if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
				ri.Verb = "watch"
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
	return strings.ToLower(method)
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
// (verbs as in KubeResolver: GET without a name is list, or watch with
// ?watch=true; subresources log, exec, attach, proxy and portforward are
// long-running and bypass APF); every other path is a non-resource request (probes,
// /metrics, /debug/...). Pace's manager API uses
// apf.Resources(apf.PaceGroup, "submissions", "jobs").
func Resources(group string, resources ...string) Resolver {
	return func(r *http.Request) RequestInfo {
		parts := splitPath(r.URL.Path)
		if len(parts) == 0 || !slices.Contains(resources, parts[0]) {
			return RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
		}
		ri := RequestInfo{IsResourceRequest: true, APIGroup: group, Resource: parts[0], Verb: resourceVerb(r.Method), Path: r.URL.Path}
		if len(parts) >= 2 {
			ri.Name = parts[1]
		}
		if len(parts) >= 3 {
			ri.Subresource = parts[2]
		}
		ri.LongRunning = slices.Contains(longRunningSubresources, ri.Subresource)
		if ri.Name == "" {
			switch ri.Verb {
			case "get":
				ri.Verb = "list"
				if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
					ri.Verb = "watch"
				}
			case "delete":
				ri.Verb = "deletecollection"
			}
		}
		return ri
	}
}
