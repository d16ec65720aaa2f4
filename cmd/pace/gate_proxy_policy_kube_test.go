package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/policysource"
	"github.com/pace-platform/pace/integration/kubetest"
)

// TestProxyFollowsTheClusterPolicy runs pace gate proxy with --kubeconfig
// and --write-status in front of a real kube-apiserver whose own APF is off
// (so that every Dangling condition is the proxy's): FlowSchemas and
// priority levels created in the cluster classify the next requests, with
// the cluster's UIDs, without a restart; a FlowSchema whose priority level
// is missing gets Dangling True, and False once the level is created.
func TestProxyFollowsTheClusterPolicy(t *testing.T) {
	t.Parallel()
	cp, ca := startKube(t, "--enable-priority-and-fairness=false")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(cp.Admin)
	kubeconfig, _ := proxyIdentity(ctx, t, cp, kc) // the documented RBAC: enough to read and write the status
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", ca, "--token-file", filepath.Join(cp.Dir, "tokens.csv"),
		"--kubeconfig", kubeconfig, "--write-status")
	fc := kc.FlowcontrolV1()

	shares := int32(5)
	level := func(name string) *flowcontrolv1.PriorityLevelConfiguration {
		return &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: &shares,
					LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	}
	schema := func(name, level string, precedence int32) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level}, MatchingPrecedence: precedence,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: kubetest.User}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"}}},
			}}}}
	}
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, level("pace-test"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fc.FlowSchemas().Create(ctx, schema("alice", "pace-test", 500), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A schema ahead of alice's whose level is missing: ignored, so alice's
	// requests still go to pace-test.
	if _, err := fc.FlowSchemas().Create(ctx, schema("ahead", "missing", 100), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	hc, err := rest.HTTPClientFor(&rest.Config{Host: url, BearerToken: kubetest.UserToken})
	if err != nil {
		t.Fatal(err)
	}
	classified := func() (string, string) {
		resp, err := hc.Get(url + "/api/v1/namespaces/default/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if n := len(resp.Header.Values(apfhttp.HeaderFlowSchemaUID)); n != 1 {
			t.Errorf("%d %s headers, want one", n, apfhttp.HeaderFlowSchemaUID)
		}
		return resp.Header.Get(apfhttp.HeaderFlowSchemaUID), resp.Header.Get(apfhttp.HeaderPriorityLevelUID)
	}
	bustest.Eventually(t, 30*time.Second, "alice classified by the cluster's schema", func() bool {
		fsUID, plUID := classified()
		return fsUID == string(fs.UID) && plUID == string(pl.UID)
	})

	dangling := func(name string, want flowcontrolv1.ConditionStatus) bool {
		got, err := fc.FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling && c.Status == want {
				return managedBy(got.ManagedFields, policysource.FieldManager)
			}
		}
		return false
	}
	bustest.Eventually(t, 30*time.Second, "Dangling True on ahead, False on alice, written by the proxy", func() bool {
		return dangling("ahead", flowcontrolv1.ConditionTrue) && dangling("alice", flowcontrolv1.ConditionFalse)
	})

	// Its level created, "ahead" classifies alice, and is no longer dangling.
	missing, err := fc.PriorityLevelConfigurations().Create(ctx, level("missing"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := fc.FlowSchemas().Get(ctx, "ahead", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "ahead in force and no longer dangling", func() bool {
		fsUID, plUID := classified()
		return fsUID == string(ahead.UID) && plUID == string(missing.UID) && dangling("ahead", flowcontrolv1.ConditionFalse)
	})
}

// managedBy reports whether manager owns some of an object's fields.
func managedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager {
			return true
		}
	}
	return false
}
