package manager

import (
	"slices"
	"strings"

	"github.com/pace-platform/pace/flowcontrol/apf"
)

// Resolver returns the API Priority and Fairness resolver of the API:
// apf.Resources in group pace.dev over the first path segment of every
// route (submissions, plugins), so that each request, with or without the
// ".json" suffix, is classified by the route that serves it: reads on
// pace-reads, writes on pace-submissions. Only a followed log
// (?follow=true) is long-running and bypasses APF.
func (a *API) Resolver() apf.Resolver {
	var resources []string
	for _, rt := range a.routes {
		first, _, _ := strings.Cut(strings.TrimPrefix(rt.path, "/"), "/")
		if !slices.Contains(resources, first) {
			resources = append(resources, first)
		}
	}
	return apf.Resources(apf.PaceGroup, resources...)
}
