package conformance

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/filters"

	"github.com/pace-platform/pace/flowcontrol/apf"
)

// kubeRequestInfo is kube-apiserver's request parser, configured as its
// server.NewRequestInfoResolver does.
var kubeRequestInfo = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// kubeLongRunning is kube-apiserver's long-running check (its defaults in
// server.DefaultLongRunningFunc's verbs and subresources).
var kubeLongRunning = filters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
	sets.NewString("attach", "exec", "proxy", "log", "portforward"))

// FuzzKubeResolverMatchesKube compares apf.KubeResolver with kube-apiserver's
// RequestInfoFactory and long-running check on arbitrary methods, paths and
// queries. Where kube-apiserver refuses the path (a bare watch or proxy
// prefix: a 500 before APF), Pace must read a non-resource request.
func FuzzKubeResolverMatchesKube(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, path, query string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}}
		got := apf.KubeResolver(r)
		kri, err := kubeRequestInfo.NewRequestInfo(r)
		if err != nil {
			if got.IsResourceRequest {
				t.Fatalf("%s %s: kube-apiserver refuses it (%v), Pace reads %+v", method, r.URL, err, got)
			}
			return
		}
		want := apf.RequestInfo{IsResourceRequest: kri.IsResourceRequest, Verb: kri.Verb, APIGroup: kri.APIGroup,
			APIVersion: kri.APIVersion, Resource: kri.Resource, Subresource: kri.Subresource, Namespace: kri.Namespace,
			Name: kri.Name, Path: kri.Path, LongRunning: kubeLongRunning(r, kri)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s %s (-kube +pace):\n%s", method, r.URL, diff)
		}
	})
}
