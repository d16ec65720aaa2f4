package manager_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/stages/manager"
)

// Every route of the API, with and without ".json", is classified by the
// route it serves under the default flow schemas: an authenticated user's
// writes on pace-submissions, reads on pace-reads, a caller without
// credentials on pace-anonymous; only a followed log bypasses APF.
func TestEveryRouteIsClassifiedByItsRoute(t *testing.T) {
	t.Parallel()
	api := manager.NewAPI(nil)
	resolve := api.Resolver()
	digest := policy.Compile(policy.Defaults())
	alice := auth.User{Name: "alice", Groups: []string{auth.Authenticated}}
	paths, _ := api.OpenAPI()["paths"].(map[string]any)
	var names []string
	for p := range paths {
		names = append(names, p)
	}
	sort.Strings(names)
	concrete := strings.NewReplacer("{id}", "job-1", "{name}", "c1", "{cert}", "k1")
	n := 0
	for _, p := range names {
		for method := range paths[p].(map[string]any) {
			method = strings.ToUpper(method)
			urls := []string{concrete.Replace(p), manager.AsperathosPrefix + concrete.Replace(p)}
			if !strings.HasSuffix(p, "}") {
				urls = append(urls, concrete.Replace(p)+".json")
			}
			if strings.HasSuffix(p, "/log") {
				urls = append(urls, concrete.Replace(p)+"?follow=false")
			}
			for _, u := range urls {
				n++
				r := httptest.NewRequest(method, u, nil)
				ri := resolve(r)
				if !ri.IsResourceRequest || ri.LongRunning {
					t.Errorf("%s %s: resolved as %+v, want a resource request that is not long-running", method, u, ri)
					continue
				}
				want := "pace-submissions"
				if method == http.MethodGet {
					want = "pace-reads"
				}
				if c := digest.Classify(apfhttp.Attributes(r.WithContext(auth.WithUser(r.Context(), alice)), ri)); c.PriorityLevel.Name != want {
					t.Errorf("%s %s by alice: level %s (flow schema %s), want %s", method, u, c.PriorityLevel.Name, c.FlowSchema.Name, want)
				}
				if c := digest.Classify(apfhttp.Attributes(r, ri)); c.PriorityLevel.Name != "pace-anonymous" {
					t.Errorf("%s %s without credentials: level %s, want pace-anonymous", method, u, c.PriorityLevel.Name)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("%d requests checked: the OpenAPI document lost its routes?", n)
	}
	for _, u := range []string{"/submissions/job-1/log?follow=true", manager.AsperathosPrefix + "/submissions/job-1/log?follow=true"} {
		if ri := resolve(httptest.NewRequest("GET", u, nil)); !ri.LongRunning {
			t.Errorf("followed log %s resolved as %+v, want long-running", u, ri)
		}
	}
	for _, s := range []struct{ method, path, want string }{ // Asperathos' routes alone
		{"GET", "/visualizing/job-1", "pace-reads"}, {"GET", "/healthz", "pace-reads"}, {"GET", "/key", "pace-reads"},
		{"GET", "/scaling", "pace-reads"}, {"POST", "/scaling/job-1", "pace-submissions"},
		{"PUT", "/monitoring/job-1/stop", "pace-submissions"}, {"POST", "/visualizing/job-1", "pace-submissions"},
	} {
		r := httptest.NewRequest(s.method, manager.AsperathosPrefix+s.path, nil)
		if c := digest.Classify(apfhttp.Attributes(r.WithContext(auth.WithUser(r.Context(), alice)), resolve(r))); c.PriorityLevel.Name != s.want {
			t.Errorf("%s %s by alice: level %s, want %s", s.method, r.URL.Path, c.PriorityLevel.Name, s.want)
		}
	}
}
