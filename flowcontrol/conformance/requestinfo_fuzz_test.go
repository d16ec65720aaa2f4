package conformance

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
)

// kubeRequestInfo is kube-apiserver's request parser, configured as its
// server.NewRequestInfoResolver does.
var kubeRequestInfo = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// kubeLongRunning is kube-apiserver's long-running check:
// filters.BasicLongRunningRequestCheck with the verbs and subresources
// kube-apiserver passes it. It is restated rather than imported because
// k8s.io/apiserver/pkg/server/filters brings in OpenTelemetry, CEL and gRPC,
// minutes of compiling for every fuzzing run.
func kubeLongRunning(ri *apirequest.RequestInfo) bool {
	return sets.NewString("watch", "proxy").Has(ri.Verb) ||
		ri.IsResourceRequest && sets.NewString("attach", "exec", "proxy", "log", "portforward").Has(ri.Subresource) ||
		!ri.IsResourceRequest && strings.HasPrefix(ri.Path, "/debug/pprof/")
}

// FuzzKubeResolverMatchesKube compares apfhttp.KubeResolver with kube-apiserver's
// RequestInfoFactory and long-running rule on arbitrary methods, paths and
// queries. Where kube-apiserver refuses the path (a bare watch or proxy
// prefix: a 500 before APF), Pace must read a non-resource request.
func FuzzKubeResolverMatchesKube(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, path, query string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}}
		got := apfhttp.KubeResolver(r)
		kri, err := kubeRequestInfo.NewRequestInfo(r)
		if err != nil {
			if got.IsResourceRequest {
				t.Fatalf("%s %s: kube-apiserver refuses it (%v), Pace reads %+v", method, r.URL, err, got)
			}
			return
		}
		want := apfhttp.RequestInfo{IsResourceRequest: kri.IsResourceRequest, Verb: kri.Verb, APIGroup: kri.APIGroup,
			APIVersion: kri.APIVersion, Resource: kri.Resource, Subresource: kri.Subresource, Namespace: kri.Namespace,
			Name: kri.Name, Path: kri.Path, LongRunning: kubeLongRunning(kri)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s %s (-kube +pace):\n%s", method, r.URL, diff)
		}
	})
}
