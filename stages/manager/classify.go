package manager

import (
	"net/http"
	"slices"
	"strings"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
)

// Resolver returns the API Priority and Fairness resolver of the API:
// apfhttp.Resources in group pace.dev over the first path segment of every
// route (submissions, plugins), so that each request, with or without the
// ".json" suffix, is classified by the route that serves it: reads on
// pace-reads, writes on pace-submissions. Only a followed log
// (?follow=true) is long-running and bypasses APF. A route under
// AsperathosPrefix is classified as the same route of Pace's API.
func (a *API) Resolver() apfhttp.Resolver {
	var resources []string
	for _, rt := range slices.Concat(a.routes, a.asperathos.routes) {
		first, _, _ := strings.Cut(strings.TrimPrefix(rt.path, "/"), "/")
		if !slices.Contains(resources, first) {
			resources = append(resources, first)
		}
	}
	resolve := apfhttp.Resources(apfhttp.PaceGroup, resources...)
	return func(r *http.Request) apfhttp.RequestInfo {
		rest, ok := strings.CutPrefix(r.URL.Path, AsperathosPrefix+"/")
		if !ok {
			return resolve(r)
		}
		u, in := *r.URL, *r
		u.Path, in.URL = "/"+rest, &u
		ri := resolve(&in)
		ri.Path = r.URL.Path
		return ri
	}
}
