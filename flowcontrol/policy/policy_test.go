package policy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

func mustLoad(t *testing.T, yaml string) policy.Objects {
	t.Helper()
	objs, err := policy.Load(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestSeedExamplesLoadUnchanged(t *testing.T) {
	for _, name := range []string{"health-for-strangers.yaml", "list-events-default-service-account.yaml"} {
		t.Run(name, func(t *testing.T) {
			objs, err := policy.LoadFile("../../examples/flowcontrol/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.FlowSchemas) != 1 || len(objs.PriorityLevels) != 0 {
				t.Fatalf("got %d schemas, %d levels; want 1, 0", len(objs.FlowSchemas), len(objs.PriorityLevels))
			}
		})
	}
}

// The seed's examples behave as the seed describes: unauthenticated health
// checks are exempt rather than global-default, and the default service
// account's event lists go to catch-all instead of service-accounts.
func TestSeedExamplesBehave(t *testing.T) {
	health, _ := policy.LoadFile("../../examples/flowcontrol/health-for-strangers.yaml")
	events, _ := policy.LoadFile("../../examples/flowcontrol/list-events-default-service-account.yaml")
	cfg := policy.Compile(policy.Overlay(policy.Overlay(policy.Defaults(), health), events))
	anonHealth := policy.Attributes{User: "system:anonymous", Groups: []string{"system:unauthenticated"}, Verb: "post", Path: "/healthz"}
	if got := cfg.Classify(anonHealth).PriorityLevel.Name; got != "exempt" {
		t.Errorf("anonymous POST /healthz: level %s, want exempt", got)
	}
	kubeOnly := policy.Defaults()
	kubeOnly.FlowSchemas = slices.DeleteFunc(kubeOnly.FlowSchemas, func(fs *flowcontrolv1.FlowSchema) bool { return strings.HasPrefix(fs.Name, "pace-") })
	if got := policy.Compile(policy.Overlay(kubeOnly, health)).Classify(anonHealth).FlowSchema.Name; got != "health-for-strangers" {
		t.Errorf("kube defaults, anonymous POST /healthz: schema %s, want health-for-strangers", got)
	}
	if got := policy.Compile(kubeOnly).Classify(anonHealth).FlowSchema.Name; got != "global-default" {
		t.Errorf("kube defaults without the example, anonymous POST /healthz: schema %s, want global-default", got)
	}
	sa := policy.Attributes{User: "system:serviceaccount:default:default", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
		IsResourceRequest: true, Verb: "list", Resource: "events", Namespace: "default"}
	if c := cfg.Classify(sa); c.FlowSchema.Name != "list-events-default-service-account" || c.PriorityLevel.Name != "catch-all" {
		t.Errorf("default SA list events: %s/%s, want list-events-default-service-account/catch-all", c.FlowSchema.Name, c.PriorityLevel.Name)
	}
	sa.Verb = "get"
	if c := cfg.Classify(sa); c.FlowSchema.Name != "service-accounts" {
		t.Errorf("default SA get event: %s, want service-accounts", c.FlowSchema.Name)
	}
	without := policy.Compile(policy.Defaults())
	anonHealth.Verb = "get"
	anonHealth.Path = "/livez"
	if got := without.Classify(anonHealth).FlowSchema.Name; got != "probes" {
		t.Errorf("without the example, anonymous GET /livez: %s, want probes", got)
	}
}

// TestDefaultsMatchKube checks the bootstrap objects against the tables of
// the reference spec (§6.1, §6.2: kube-apiserver v1.37's bootstrap config).
func TestDefaultsMatchKube(t *testing.T) {
	d := policy.Defaults()
	levels := map[string][6]int32{ // type (0 exempt, 1 reject, 2 queue), NCS, lendable, queues, hand, QLL
		"exempt":          {0, 0, 0, 0, 0, 0},
		"catch-all":       {1, 5, 0, 0, 0, 0},
		"system":          {2, 30, 33, 64, 6, 50},
		"node-high":       {2, 40, 25, 64, 6, 50},
		"leader-election": {2, 10, 0, 16, 4, 50},
		"workload-high":   {2, 40, 50, 128, 6, 50},
		"workload-low":    {2, 100, 90, 128, 6, 50},
		"global-default":  {2, 20, 50, 128, 6, 50},
	}
	for _, pl := range d.PriorityLevels {
		want, ok := levels[pl.Name]
		if !ok {
			continue // Pace's own
		}
		delete(levels, pl.Name)
		var got [6]int32
		switch {
		case pl.Spec.Exempt != nil:
			got = [6]int32{0, *pl.Spec.Exempt.NominalConcurrencyShares, *pl.Spec.Exempt.LendablePercent}
		case pl.Spec.Limited.LimitResponse.Queuing == nil:
			got = [6]int32{1, *pl.Spec.Limited.NominalConcurrencyShares, *pl.Spec.Limited.LendablePercent}
		default:
			q := pl.Spec.Limited.LimitResponse.Queuing
			got = [6]int32{2, *pl.Spec.Limited.NominalConcurrencyShares, *pl.Spec.Limited.LendablePercent, q.Queues, q.HandSize, q.QueueLengthLimit}
		}
		if got != want {
			t.Errorf("level %s = %v, want %v", pl.Name, got, want)
		}
		if pl.Spec.Limited != nil && pl.Spec.Limited.BorrowingLimitPercent != nil {
			t.Errorf("level %s has a borrowing limit; kube's defaults have none", pl.Name)
		}
	}
	if len(levels) > 0 {
		t.Errorf("missing levels %v", levels)
	}
	schemas := map[string]string{ // precedence/level/distinguisher
		"exempt": "1/exempt/", "probes": "2/exempt/", "system-leader-election": "100/leader-election/ByUser",
		"system-node-high": "400/node-high/ByUser", "system-nodes": "500/system/ByUser",
		"kube-controller-manager": "800/workload-high/ByNamespace", "kube-scheduler": "800/workload-high/ByNamespace",
		"kube-system-service-accounts": "900/workload-high/ByNamespace", "service-accounts": "9000/workload-low/ByUser",
		"global-default": "9900/global-default/ByUser", "catch-all": "10000/catch-all/ByUser",
	}
	for _, fs := range d.FlowSchemas {
		want, ok := schemas[fs.Name]
		if !ok {
			continue
		}
		delete(schemas, fs.Name)
		dist := ""
		if fs.Spec.DistinguisherMethod != nil {
			dist = string(fs.Spec.DistinguisherMethod.Type)
		}
		if got := fmt.Sprintf("%d/%s/%s", fs.Spec.MatchingPrecedence, fs.Spec.PriorityLevelConfiguration.Name, dist); got != want {
			t.Errorf("schema %s = %s, want %s", fs.Name, got, want)
		}
	}
	if len(schemas) > 0 {
		t.Errorf("missing schemas %v", schemas)
	}
	for _, fs := range d.FlowSchemas {
		if fs.Annotations[policy.AutoUpdateAnnotation] != "true" {
			t.Errorf("%s lacks %s=true", fs.Name, policy.AutoUpdateAnnotation)
		}
	}
	for _, pl := range d.PriorityLevels {
		if pl.Annotations[policy.AutoUpdateAnnotation] != "true" {
			t.Errorf("%s lacks %s=true", pl.Name, policy.AutoUpdateAnnotation)
		}
	}
	if errs := d.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
}
