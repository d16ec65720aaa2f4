package policy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestDefaultsMatchKube(t *testing.T) {
	d := policy.Defaults()
	kube, err := policy.LoadFile("../../../shared/reference/k8s-apf-defaults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range kube.FlowSchemas {
		i := slices.IndexFunc(d.FlowSchemas, func(fs *flowcontrolv1.FlowSchema) bool { return fs.Name == want.Name })
		if i < 0 {
			t.Errorf("missing FlowSchema %s", want.Name)
			continue
		}
		if diff := cmp.Diff(want.Spec, d.FlowSchemas[i].Spec); diff != "" {
			t.Errorf("%s spec (-kube +pace):\n%s", want.Name, diff)
		}
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
