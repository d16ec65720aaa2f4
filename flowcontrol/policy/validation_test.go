package policy_test

import (
	"strings"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error, field paths included
	}{
		{"precedence too high", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: a}
spec:
  matchingPrecedence: 10001
  priorityLevelConfiguration: {name: global-default}
  rules: [{subjects: [{kind: User, user: {name: "*"}}], nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]}]
`, []string{`flowSchemas[a].spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000`}},
		{"precedence 1 reserved", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: a}
spec:
  matchingPrecedence: 1
  priorityLevelConfiguration: {name: global-default}
  rules: [{subjects: [{kind: User, user: {name: "*"}}], nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]}]
`, []string{`only the schema named 'exempt' may have matchingPrecedence 1`}},
		{"star must stand alone, bad url, bad verb, bad subject", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: a}
spec:
  priorityLevelConfiguration: {name: global-default}
  rules:
  - subjects: [{kind: Robot}, {kind: User}, {kind: Group, group: {name: x}, user: {name: y}}]
    resourceRules: [{verbs: ["*", get], apiGroups: ["*", apps], resources: [pods, "*"], namespaces: ["*", x]}, {verbs: [fly], apiGroups: [""], resources: [pods]}]
    nonResourceRules: [{verbs: [get], nonResourceURLs: ["/a*", "x", "/b//c"]}]
`, []string{
			`flowSchemas[a].spec.rules[0].subjects[0].kind: Unsupported value: "Robot"`,
			`flowSchemas[a].spec.rules[0].subjects[1].user: Required value`,
			`flowSchemas[a].spec.rules[0].subjects[2].user: Forbidden`,
			`flowSchemas[a].spec.rules[0].resourceRules[0].verbs: Invalid value`,
			`flowSchemas[a].spec.rules[0].resourceRules[0].apiGroups: Invalid value`,
			`flowSchemas[a].spec.rules[0].resourceRules[0].resources: Invalid value`,
			`flowSchemas[a].spec.rules[0].resourceRules[0].namespaces: Invalid value`,
			`flowSchemas[a].spec.rules[0].resourceRules[1].verbs: Unsupported value`,
			`flowSchemas[a].spec.rules[0].resourceRules[1].namespaces: Required value`,
			`flowSchemas[a].spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "/a*": wildcard can only do suffix matching`,
			`nonResourceURLs[1]: Invalid value: "x": must start with slash`,
			`nonResourceURLs[2]: Invalid value: "/b//c": must not contain double slash`,
		}},
		{"hand size", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: p}
spec:
  type: Limited
  limited:
    limitResponse: {type: Queue, queuing: {queues: 4, handSize: 5}}
`, []string{`priorityLevelConfigurations[p].spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)`}},
		{"entropy", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: p}
spec:
  type: Limited
  limited:
    limitResponse: {type: Queue, queuing: {queues: 512, handSize: 8}}
`, []string{`required entropy bits of deckSize 512 and handSize 8 should not be greater than 60`}},
		{"exempt type needs exempt name", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: p}
spec: {type: Exempt}
`, []string{`priorityLevelConfigurations[p].spec.type: Invalid value: "Exempt": type must be 'Exempt' if and only if name is 'exempt'`}},
		{"lendable percent and queuing with reject", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: p}
spec:
  type: Limited
  limited: {lendablePercent: 101, nominalConcurrencyShares: -1, limitResponse: {type: Reject, queuing: {queues: 1}}}
`, []string{`spec.limited.lendablePercent: Invalid value: 101`, `spec.limited.nominalConcurrencyShares: Invalid value: -1`, `spec.limited.limitResponse.queuing: Forbidden`}},
		{"mandatory spec fixed", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: exempt}
spec:
  matchingPrecedence: 1
  priorityLevelConfiguration: {name: exempt}
  rules: [{subjects: [{kind: User, user: {name: "*"}}], nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]}]
`, []string{`spec of 'exempt' must equal the fixed value`}},
		{"unknown field", `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: a}
spec: {matchingPrecedense: 5}
`, []string{`document[0]`, `unknown field`}},
		{"unknown kind and version", `apiVersion: v1
kind: Pod
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: Pod
`, []string{`document[0].apiVersion: Unsupported value: "v1"`, `document[1].kind: Unsupported value: "Pod"`}},
		{"duplicate", strings.Repeat(`---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: p}
spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
`, 2), []string{`priorityLevelConfigurations[1].metadata.name: Duplicate value: "p"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := policy.Load(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if len(objs.FlowSchemas)+len(objs.PriorityLevels) != 0 {
				t.Errorf("objects returned with an error: %+v", objs)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadDefaultsAndV1beta3(t *testing.T) {
	objs := mustLoad(t, `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: p}
spec:
  type: Limited
  limited: {limitResponse: {type: Queue, queuing: {}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1beta3
kind: PriorityLevelConfiguration
metadata: {name: q}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 0, limitResponse: {type: Queue, queuing: {queues: 16}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: r}
spec: {type: Limited, limited: {nominalConcurrencyShares: 0, limitResponse: {type: Reject}}}
---
{"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "j"},
 "spec": {"priorityLevelConfiguration": {"name": "p"}, "rules": [{"subjects": [{"kind": "User", "user": {"name": "*"}}], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
`)
	p, q, r := objs.PriorityLevels[0].Spec.Limited, objs.PriorityLevels[1].Spec.Limited, objs.PriorityLevels[2].Spec.Limited
	if *p.NominalConcurrencyShares != 30 || *p.LendablePercent != 0 || p.LimitResponse.Queuing == nil {
		t.Fatalf("p not defaulted: %+v", p)
	}
	if pq := p.LimitResponse.Queuing; pq != nil && (pq.Queues != 64 || pq.HandSize != 8 || pq.QueueLengthLimit != 50) {
		t.Errorf("queuing = %+v, want 64/8/50", pq)
	}
	if *q.NominalConcurrencyShares != 30 || q.LimitResponse.Queuing.Queues != 16 {
		t.Errorf("v1beta3 zero shares = %d, want 30 (queues %d)", *q.NominalConcurrencyShares, q.LimitResponse.Queuing.Queues)
	}
	if *r.NominalConcurrencyShares != 0 {
		t.Errorf("v1 zero shares = %d, want 0", *r.NominalConcurrencyShares)
	}
	if fs := objs.FlowSchemas[0]; fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("precedence = %d, want 1000", fs.Spec.MatchingPrecedence)
	}
}
