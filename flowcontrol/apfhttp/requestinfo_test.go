package apfhttp_test

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
)

func TestKubeResolver(t *testing.T) {
	tests := []struct {
		method, url string
		want        apfhttp.RequestInfo
	}{
		{"GET", "/api/v1/namespaces/default/pods", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "pods", Namespace: "default"}},
		{"GET", "/api/v1/namespaces/default/pods/web-0", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "pods", Namespace: "default", Name: "web-0"}},
		{"GET", "/api/v1/pods?watch=true", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods", LongRunning: true}},
		{"GET", "/api/v1/watch/namespaces/x/pods", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods", Namespace: "x", LongRunning: true}},
		{"POST", "/apis/apps/v1/namespaces/x/deployments", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "create", APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Namespace: "x"}},
		{"PUT", "/apis/apps/v1/namespaces/x/deployments/d/scale", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "update", APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Subresource: "scale", Namespace: "x", Name: "d"}},
		{"PATCH", "/api/v1/nodes/n1/status", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "patch", APIVersion: "v1", Resource: "nodes", Subresource: "status", Name: "n1"}},
		{"DELETE", "/api/v1/namespaces/x/pods", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIVersion: "v1", Resource: "pods", Namespace: "x"}},
		{"GET", "/api/v1/namespaces/x", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "namespaces", Namespace: "x", Name: "x"}},
		{"PUT", "/api/v1/namespaces/x/finalize", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "update", APIVersion: "v1", Resource: "namespaces", Subresource: "finalize", Namespace: "x", Name: "x"}},
		{"POST", "/api/v1/namespaces/x/pods/p/exec", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "create", APIVersion: "v1", Resource: "pods", Subresource: "exec", Namespace: "x", Name: "p", LongRunning: true}},
		{"GET", "/api/v1/namespaces/x/pods/p/log", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "get", APIVersion: "v1", Resource: "pods", Subresource: "log", Namespace: "x", Name: "p", LongRunning: true}},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "get", APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: "kube-system", Name: "kcm"}},
		{"GET", "/healthz/etcd", apfhttp.RequestInfo{Verb: "get"}},
		{"GET", "/api", apfhttp.RequestInfo{Verb: "get"}},
		{"GET", "/apis/apps/v1", apfhttp.RequestInfo{Verb: "get"}},
		{"HEAD", "/readyz", apfhttp.RequestInfo{Verb: "head"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.url, nil)
			tt.want.Path = r.URL.Path
			if diff := cmp.Diff(tt.want, apfhttp.KubeResolver(r)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestResources(t *testing.T) {
	resolve := apfhttp.Resources(apfhttp.PaceGroup, "submissions", "plugins")
	sub := func(verb, name, subresource string, longRunning bool) apfhttp.RequestInfo {
		return apfhttp.RequestInfo{IsResourceRequest: true, Verb: verb, APIGroup: apfhttp.PaceGroup, Resource: "submissions",
			Name: name, Subresource: subresource, LongRunning: longRunning}
	}
	tests := []struct {
		method, url string
		want        apfhttp.RequestInfo
	}{
		{"POST", "/submissions", sub("create", "", "", false)},
		{"POST", "/submissions.json", sub("create", "", "", false)},
		{"GET", "/submissions", sub("list", "", "", false)},
		{"GET", "/submissions.json", sub("list", "", "", false)},
		{"GET", "/submissions/j1.json", sub("get", "j1", "", false)},
		{"GET", "/submissions/j1/log", sub("get", "j1", "log", false)},
		{"GET", "/submissions/j1/log.json?follow=false", sub("get", "j1", "log", false)},
		{"GET", "/submissions/j1/log?follow=true", sub("get", "j1", "log", true)},
		{"GET", "/submissions/j1/log?follow=1", sub("get", "j1", "log", true)},
		{"PUT", "/submissions/j1/stop", sub("update", "j1", "stop", false)},
		{"PUT", "/submissions/j1/stop.json", sub("update", "j1", "stop", false)},
		{"GET", "/submissions?watch=true", sub("watch", "", "", true)},
		{"POST", "/plugins.json", apfhttp.RequestInfo{IsResourceRequest: true, Verb: "create", APIGroup: apfhttp.PaceGroup, Resource: "plugins"}},
		{"GET", "/healthz", apfhttp.RequestInfo{Verb: "get"}},
		{"HEAD", "/healthz", apfhttp.RequestInfo{Verb: "get"}},
		{"POST", "/metrics", apfhttp.RequestInfo{Verb: "post"}},
		{"GET", "/openapi.json", apfhttp.RequestInfo{Verb: "get"}},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.url, nil)
		tt.want.Path = r.URL.Path
		if diff := cmp.Diff(tt.want, resolve(r)); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.method, tt.url, diff)
		}
	}
}
