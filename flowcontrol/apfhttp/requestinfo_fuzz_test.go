package apfhttp_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
)

// resourceVerbs are the verbs of resource requests made with the standard
// methods.
var resourceVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "proxy"}

// FuzzKubeResolver checks KubeResolver's invariants on arbitrary paths,
// queries and methods (flowcontrol/conformance compares it with
// kube-apiserver's own parser).
func FuzzKubeResolver(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, path, query string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}}
		ri := apfhttp.KubeResolver(r)
		checkRequestInfo(t, r, ri)
		segs := strings.Split(strings.Trim(path, "/"), "/")
		// A resource path is /api/{version}/{rest} or /apis/{group}/{version}/{rest}, where rest is
		// [{watch|proxy}/][namespaces/{namespace}/]{resource}[/...] and not only "watch" or "proxy".
		var rest []string
		switch {
		case len(segs) >= 3 && segs[0] == "api":
			rest = segs[2:]
		case len(segs) >= 4 && segs[0] == "apis":
			rest = segs[3:]
		}
		if len(rest) > 0 && (rest[0] == "watch" || rest[0] == "proxy") {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			if ri.IsResourceRequest {
				t.Fatalf("%s %s: a non-resource path read as %+v", method, path, ri)
			}
			return
		}
		switch {
		case !ri.IsResourceRequest:
			t.Fatalf("%s %s: a resource path read as a non-resource request", method, path)
		case segs[0] == "api" && ri.APIGroup != "", segs[0] == "apis" && ri.APIGroup != segs[1]:
			t.Fatalf("%s %s: group %q", method, path, ri.APIGroup)
		}
		if rest[0] == "namespaces" && len(rest) >= 2 {
			if ri.Namespace != rest[1] {
				t.Fatalf("%s %s: namespace %q, want %q", method, path, ri.Namespace, rest[1])
			}
			if len(rest) >= 3 && rest[2] != "status" && rest[2] != "finalize" {
				rest = rest[2:]
			}
		} else if ri.Namespace != "" {
			t.Fatalf("%s %s: namespace %q in a cluster-scoped path", method, path, ri.Namespace)
		}
		if ri.Resource != rest[0] {
			t.Fatalf("%s %s: resource %q, want %q", method, path, ri.Resource, rest[0])
		}
	})
}

// FuzzResources checks the same of the resolver of Pace's own API.
func FuzzResources(f *testing.F) {
	resolve := apfhttp.Resources(apfhttp.PaceGroup, "submissions", "jobs")
	f.Fuzz(func(t *testing.T, method, path, query string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}}
		ri := resolve(r)
		checkRequestInfo(t, r, ri)
		segs := strings.Split(strings.Trim(path, "/"), "/")
		if resource := slices.Contains([]string{"submissions", "jobs"}, segs[0]); resource != ri.IsResourceRequest ||
			resource && (ri.Resource != segs[0] || ri.APIGroup != apfhttp.PaceGroup) {
			t.Fatalf("%s %s read as %+v", method, path, ri)
		}
	})
}

// checkRequestInfo fails t unless ri holds the invariants of every resolver.
func checkRequestInfo(t *testing.T, r *http.Request, ri apfhttp.RequestInfo) {
	t.Helper()
	if ri.Path != r.URL.Path {
		t.Fatalf("%s %s: path %q", r.Method, r.URL, ri.Path)
	}
	if !ri.IsResourceRequest {
		want := apfhttp.RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method), LongRunning: ri.LongRunning}
		if ri != want {
			t.Fatalf("%s %s: non-resource request with resource attributes: %+v", r.Method, r.URL, ri)
		}
		return
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// A list or watch may name its object with a fieldSelector; a watch by path names it in the path.
	selected := (ri.Verb == "list" || ri.Verb == "watch") && strings.Contains(r.URL.RawQuery, "fieldSelector")
	for name, v := range map[string]string{"resource": ri.Resource, "namespace": ri.Namespace, "name": ri.Name, "subresource": ri.Subresource} {
		if v != "" && !slices.Contains(segs, v) && (name != "name" || !selected) {
			t.Fatalf("%s %s: %s %q is not a segment of the path", r.Method, r.URL, name, v)
		}
	}
	switch {
	case ri.Verb != "" && !slices.Contains(resourceVerbs, ri.Verb):
		t.Fatalf("%s %s: verb %q", r.Method, r.URL, ri.Verb)
	case ri.Verb == "deletecollection" && ri.Name != "", ri.Verb == "list" && ri.Name != "" && !selected:
		t.Fatalf("%s %s: %s of the single object %q", r.Method, r.URL, ri.Verb, ri.Name)
	case ri.IsWatch() && !ri.LongRunning:
		t.Fatalf("%s %s: a watch that is not long-running", r.Method, r.URL)
	}
}
