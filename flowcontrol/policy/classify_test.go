package policy_test

import (
	"fmt"
	"testing"

	"github.com/pace-platform/pace/flowcontrol"
	"github.com/pace-platform/pace/flowcontrol/policy"
)

var (
	nodes     = []string{"system:nodes", "system:authenticated"}
	authd     = []string{"system:authenticated"}
	anonymous = []string{"system:unauthenticated"}
	kubeSysSA = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	appSA     = []string{"system:serviceaccounts", "system:serviceaccounts:app", "system:authenticated"}
)

func res(user string, groups []string, verb, group, resource, ns string) policy.Attributes {
	r, sub, _ := cut(resource)
	return policy.Attributes{User: user, Groups: groups, IsResourceRequest: true, Verb: verb, APIGroup: group, Resource: r, Subresource: sub, Namespace: ns}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func nonRes(user string, groups []string, verb, path string) policy.Attributes {
	return policy.Attributes{User: user, Groups: groups, Verb: verb, Path: path}
}

func TestClassifyDefaults(t *testing.T) {
	cfg := policy.Compile(policy.Defaults())
	tests := []struct {
		name          string
		attrs         policy.Attributes
		schema, level string
		distinguisher string
	}{
		{"admin", res("root", []string{"system:masters", "system:authenticated"}, "delete", "", "pods", "x"), "exempt", "exempt", ""},
		{"kubelet node status", res("system:node:n1", nodes, "patch", "", "nodes/status", ""), "system-node-high", "node-high", "system:node:n1"},
		{"kubelet lease", res("system:node:n1", nodes, "update", "coordination.k8s.io", "leases", "kube-node-lease"), "system-node-high", "node-high", "system:node:n1"},
		{"kubelet pods", res("system:node:n1", nodes, "list", "", "pods", ""), "system-nodes", "system", "system:node:n1"},
		{"kcm leader election", res("system:kube-controller-manager", authd, "update", "coordination.k8s.io", "leases", "kube-system"), "system-leader-election", "leader-election", "system:kube-controller-manager"},
		{"kcm lease cluster-scoped is not leader election", res("system:kube-controller-manager", authd, "get", "coordination.k8s.io", "leases", ""), "kube-controller-manager", "workload-high", ""},
		{"kcm", res("system:kube-controller-manager", authd, "list", "apps", "deployments", "default"), "kube-controller-manager", "workload-high", "default"},
		{"scheduler", res("system:kube-scheduler", authd, "create", "", "pods/binding", "web"), "kube-scheduler", "workload-high", "web"},
		{"kube-system SA lease", res("system:serviceaccount:kube-system:foo", kubeSysSA, "get", "coordination.k8s.io", "leases", "kube-system"), "system-leader-election", "leader-election", "system:serviceaccount:kube-system:foo"},
		{"kube-system SA", res("system:serviceaccount:kube-system:foo", kubeSysSA, "list", "", "pods", "app"), "kube-system-service-accounts", "workload-high", "app"},
		{"app SA", res("system:serviceaccount:app:default", appSA, "list", "", "events", "app"), "service-accounts", "workload-low", "system:serviceaccount:app:default"},
		{"user", res("alice", authd, "get", "", "pods", "default"), "global-default", "global-default", "alice"},
		{"anonymous resource", res("system:anonymous", anonymous, "get", "", "pods", "default"), "pace-anonymous", "pace-anonymous", ""},
		{"anonymous submission", res("system:anonymous", anonymous, "create", "pace.dev", "submissions", ""), "pace-anonymous", "pace-anonymous", ""},
		{"anonymous read", res("system:anonymous", anonymous, "list", "pace.dev", "submissions", ""), "pace-anonymous", "pace-anonymous", ""},
		{"probe /healthz/etcd", nonRes("system:anonymous", anonymous, "get", "/healthz/etcd"), "probes", "exempt", ""},
		{"probe /readyz authenticated", nonRes("alice", authd, "get", "/readyz"), "probes", "exempt", ""},
		{"probe HEAD, as kube resolves it", nonRes("system:anonymous", anonymous, "head", "/healthz"), "pace-anonymous", "pace-anonymous", ""},
		{"probe POST is not a probe", nonRes("system:anonymous", anonymous, "post", "/healthz"), "pace-anonymous", "pace-anonymous", ""},
		{"anonymous POST elsewhere", nonRes("system:anonymous", anonymous, "post", "/debug"), "pace-anonymous", "pace-anonymous", ""},
		{"/healthzfoo is not a probe", nonRes("system:anonymous", anonymous, "get", "/healthzfoo"), "pace-anonymous", "pace-anonymous", ""},
		{"metrics", nonRes("alice", authd, "get", "/metrics"), "pace-probes", "exempt", ""},
		{"metrics anonymous", nonRes("system:anonymous", anonymous, "get", "/metrics"), "pace-probes", "exempt", ""},
		{"metrics POST from a stranger", nonRes("system:anonymous", anonymous, "post", "/metrics"), "pace-anonymous", "pace-anonymous", ""},
		{"metrics POST from a user", nonRes("alice", authd, "post", "/metrics"), "global-default", "global-default", "alice"},
		{"user elsewhere", nonRes("alice", authd, "post", "/debug"), "global-default", "global-default", "alice"},
		{"pace component", res("pace-manager", []string{policy.ComponentsGroup, "system:authenticated"}, "create", "pace.dev", "submissions", ""), "pace-internal", "exempt", ""},
		{"pace submission", res("alice", authd, "create", "pace.dev", "submissions", ""), "pace-submissions", "pace-submissions", "alice"},
		{"pace read", res("bob", authd, "list", "pace.dev", "submissions", ""), "pace-reads", "pace-reads", "bob"},
		{"no groups at all", res("mallory", nil, "get", "", "pods", "x"), "catch-all", "catch-all", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg.Classify(tt.attrs)
			if c.FlowSchema.Name != tt.schema || c.PriorityLevel.Name != tt.level || c.Distinguisher != tt.distinguisher {
				t.Errorf("got %s/%s %q, want %s/%s %q", c.FlowSchema.Name, c.PriorityLevel.Name, c.Distinguisher, tt.schema, tt.level, tt.distinguisher)
			}
		})
	}
}

func TestHashVectors(t *testing.T) {
	cfg := policy.Compile(policy.Defaults())
	c := cfg.Classify(res("alice", authd, "get", "", "pods", "default"))
	if c.Hash != 0xf4de3bd42ccdf6b7 {
		t.Errorf("hash = %#x, want 0xf4de3bd42ccdf6b7", c.Hash)
	}
	if got := fmt.Sprint(c.Hand()); got != "[55 62 126 125 105 1]" {
		t.Errorf("hand = %s, want [55 62 126 125 105 1]", got)
	}
	if h := flowcontrol.HashFlow("catch-all", ""); h != 0x6b546fa48f815ead {
		t.Errorf("catch-all hash %#x", h)
	}
	// catch-all is a Reject level: no distinguisher and no hash.
	if c := cfg.Classify(res("mallory", nil, "get", "", "pods", "x")); c.Hash != 0 || c.Hand() != nil {
		t.Errorf("catch-all classification has hash %#x hand %v", c.Hash, c.Hand())
	}
}

func TestDanglingAndImagined(t *testing.T) {
	objs := mustLoad(t, `
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: orphan}
spec:
  matchingPrecedence: 10
  priorityLevelConfiguration: {name: nowhere}
  rules:
  - subjects: [{kind: Group, group: {name: "*"}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`)
	cfg := policy.Compile(objs)
	if fmt.Sprint(cfg.Dangling) != "[orphan]" {
		t.Errorf("dangling = %v, want [orphan]", cfg.Dangling)
	}
	// Only the imagined mandatory objects remain.
	if c := cfg.Classify(nonRes("alice", authd, "get", "/x")); c.FlowSchema.Name != "catch-all" || c.PriorityLevel.Name != "catch-all" {
		t.Errorf("got %s/%s, want catch-all", c.FlowSchema.Name, c.PriorityLevel.Name)
	}
	if c := cfg.Classify(nonRes("root", []string{"system:masters"}, "get", "/x")); c.FlowSchema.Name != "exempt" {
		t.Errorf("got %s, want exempt", c.FlowSchema.Name)
	}
}
