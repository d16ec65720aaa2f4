package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	_ "unsafe" // for go:linkname

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/util/apihelpers"
	kubeflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/pace-platform/pace/flowcontrol/policy"
)

// kubeMatches is kube-apiserver's unexported FlowSchema matcher (rule.go).
//
//go:linkname kubeMatches k8s.io/apiserver/pkg/util/flowcontrol.matchesFlowSchema
func kubeMatches(digest kubeflowcontrol.RequestDigest, fs *flowcontrolv1.FlowSchema) bool

// kubeDistinguisher is kube-apiserver's unexported flow distinguisher.
//
//go:linkname kubeDistinguisher k8s.io/apiserver/pkg/util/flowcontrol.computeFlowDistinguisher
func kubeDistinguisher(rd kubeflowcontrol.RequestDigest, method *flowcontrolv1.FlowDistinguisherMethod) string

// kubeHash is kube-apiserver's unexported flow hash.
//
//go:linkname kubeHash k8s.io/apiserver/pkg/util/flowcontrol.hashFlowID
func kubeHash(fsName, fDistinguisher string) uint64

// Small vocabularies make collisions (and so matches) frequent.
var (
	users      = []string{"alice", "bob", "system:anonymous", "system:serviceaccount:ns1:default", "system:serviceaccount:ns1:robot", "system:serviceaccount:kube-system:x", "system:kube-scheduler"}
	groups     = []string{"system:authenticated", "system:unauthenticated", "system:serviceaccounts", "team", "system:masters", "system:nodes"}
	verbs      = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "proxy"}
	apiGroups  = []string{"", "apps", "coordination.k8s.io"}
	resources  = []string{"pods", "nodes", "leases", "events"}
	subres     = []string{"", "", "status", "log"}
	namespaces = []string{"", "ns1", "kube-system", "default"}
	paths      = []string{"/", "/healthz", "/healthz/etcd", "/healthzx", "/livez", "/api", "/apis/apps", "/metrics", "/openapi/v2"}
	urlRules   = []string{"/healthz", "/healthz/*", "/livez", "/api/*", "/", "/apis", "/metrics"}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// list returns ["*"] or 1..3 distinct values (validation's shapes).
func list(rng *rand.Rand, vocab []string) []string {
	if rng.IntN(4) == 0 {
		return []string{"*"}
	}
	var out []string
	for range 1 + rng.IntN(3) {
		if v := pick(rng, vocab); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func randomSubject(rng *rand.Rand) flowcontrolv1.Subject {
	switch rng.IntN(3) {
	case 0:
		name := pick(rng, users)
		if rng.IntN(5) == 0 {
			name = "*"
		}
		return flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: name}}
	case 1:
		name := pick(rng, groups)
		if rng.IntN(5) == 0 {
			name = "*"
		}
		return flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: name}}
	}
	return flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{
		Namespace: pick(rng, []string{"ns1", "kube-system"}), Name: pick(rng, []string{"default", "robot", "*"})}}
}

func randomSchema(rng *rand.Rand, i int, levels []string) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fs-%02d", i)}, Spec: flowcontrolv1.FlowSchemaSpec{
		MatchingPrecedence:         int32(2 + rng.IntN(6)*1000), //nolint:gosec // small
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pick(rng, levels)},
	}}
	switch rng.IntN(3) {
	case 0:
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType}
	case 1:
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByNamespaceType}
	}
	for range 1 + rng.IntN(2) {
		var r flowcontrolv1.PolicyRulesWithSubjects
		for range 1 + rng.IntN(2) {
			r.Subjects = append(r.Subjects, randomSubject(rng))
		}
		if rng.IntN(3) > 0 {
			rr := flowcontrolv1.ResourcePolicyRule{Verbs: list(rng, verbs), APIGroups: list(rng, apiGroups), ClusterScope: rng.IntN(2) == 0}
			rr.Resources = list(rng, resources)
			if !slices.Contains(rr.Resources, "*") && rng.IntN(3) == 0 {
				rr.Resources = append(rr.Resources, pick(rng, resources)+"/status")
			}
			if ns := list(rng, namespaces[1:]); rng.IntN(4) > 0 || !rr.ClusterScope {
				rr.Namespaces = ns
			}
			r.ResourceRules = append(r.ResourceRules, rr)
		}
		if len(r.ResourceRules) == 0 || rng.IntN(2) == 0 {
			nr := flowcontrolv1.NonResourcePolicyRule{Verbs: list(rng, verbs), NonResourceURLs: list(rng, urlRules)}
			r.NonResourceRules = append(r.NonResourceRules, nr)
		}
		fs.Spec.Rules = append(fs.Spec.Rules, r)
	}
	return fs
}

func randomClassifyRequest(rng *rand.Rand) (policy.Attributes, kubeflowcontrol.RequestDigest) {
	name := pick(rng, users)
	var gs []string
	for _, g := range groups {
		if rng.IntN(3) == 0 {
			gs = append(gs, g)
		}
	}
	a := policy.Attributes{User: name, Groups: gs, Verb: pick(rng, verbs)}
	ri := &genericrequest.RequestInfo{Verb: a.Verb}
	if rng.IntN(3) > 0 {
		a.IsResourceRequest = true
		a.APIGroup, a.Resource, a.Subresource, a.Namespace = pick(rng, apiGroups), pick(rng, resources), pick(rng, subres), pick(rng, namespaces)
		ri.IsResourceRequest, ri.APIGroup, ri.Resource, ri.Subresource, ri.Namespace = true, a.APIGroup, a.Resource, a.Subresource, a.Namespace
	} else {
		a.Path = pick(rng, paths)
		ri.Path = a.Path
	}
	return a, kubeflowcontrol.RequestDigest{RequestInfo: ri, User: &user.DefaultInfo{Name: name, Groups: gs}}
}

// TestClassificationMatchesKube compares, on random FlowSchemas and
// requests, Pace's matcher with kube-apiserver's (rule by rule), the whole
// classification (kube's FlowSchemaSequence order, first match) and the
// distinguisher and hash.
func TestClassificationMatchesKube(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	levels := []string{"global-default", "workload-low", "exempt", "catch-all"}
	matches, compared := 0, 0
	for trial := range 200 {
		var schemas []*flowcontrolv1.FlowSchema
		for i := range 12 {
			schemas = append(schemas, randomSchema(rng, i, levels))
		}
		objs := policy.Objects{FlowSchemas: schemas}
		policy.SetDefaults(&objs)
		if errs := objs.Validate(); len(errs) > 0 {
			t.Fatalf("trial %d: generated invalid schemas: %v", trial, errs)
		}
		digest := policy.Compile(policy.Overlay(policy.Defaults(), objs))
		// kube's order over the same schema set.
		all := digest.FlowSchemas()
		kubeOrder := slices.Clone(all)
		sort.Sort(apihelpers.FlowSchemaSequence(kubeOrder))
		if !slices.Equal(all, kubeOrder) {
			t.Fatalf("trial %d: matching order differs from kube's FlowSchemaSequence", trial)
		}
		for range 100 {
			a, rd := randomClassifyRequest(rng)
			for _, fs := range schemas {
				compared++
				got, want := policy.Matches(fs, a), kubeMatches(rd, fs)
				if got != want {
					t.Fatalf("trial %d: schema %+v request %+v: pace %v, kube %v", trial, fs.Spec, a, got, want)
				}
				if got {
					matches++
				}
			}
			c := digest.Classify(a)
			var kfs *flowcontrolv1.FlowSchema
			for _, fs := range kubeOrder {
				if kubeMatches(rd, fs) {
					kfs = fs
					break
				}
			}
			if kfs == nil { // kube falls back to catch-all (and logs a warning)
				kfs = kubeOrder[len(kubeOrder)-1]
			}
			if kfs.Name != c.FlowSchema.Name {
				t.Fatalf("trial %d: request %+v: pace %s, kube %v", trial, a, c.FlowSchema.Name, kfs)
			}
			if d := kubeDistinguisher(rd, kfs.Spec.DistinguisherMethod); c.Hash != 0 && (d != c.Distinguisher || kubeHash(kfs.Name, d) != c.Hash) {
				t.Fatalf("trial %d: request %+v: distinguisher/hash %q %#x, kube %q %#x", trial, a, c.Distinguisher, c.Hash, d, kubeHash(kfs.Name, d))
			}
		}
	}
	if matches < compared/50 { // about 5% match with these vocabularies
		t.Errorf("only %d of %d comparisons matched: the generator is too sparse", matches, compared)
	}
	t.Logf("%d schema×request comparisons, %d matches", compared, matches)
}

// benchAttrs is a service account's namespaced list: it passes most of the
// default schemas before service-accounts matches.
var benchAttrs = policy.Attributes{User: "system:serviceaccount:app:default", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:app", "system:authenticated"},
	IsResourceRequest: true, Verb: "list", Resource: "pods", Namespace: "app"}

func BenchmarkClassify(b *testing.B) {
	digest := policy.Compile(policy.Defaults())
	schemas := digest.FlowSchemas()
	b.Run("pace", func(b *testing.B) {
		for b.Loop() {
			if c := digest.Classify(benchAttrs); c.FlowSchema.Name != "service-accounts" {
				b.Fatal(c.FlowSchema.Name)
			}
		}
	})
	b.Run("kube", func(b *testing.B) {
		rd := kubeflowcontrol.RequestDigest{User: &user.DefaultInfo{Name: benchAttrs.User, Groups: benchAttrs.Groups},
			RequestInfo: &genericrequest.RequestInfo{IsResourceRequest: true, Verb: "list", Resource: "pods", Namespace: "app"}}
		for b.Loop() { // kube's startRequest loop: first match, then distinguisher and hash
			for _, fs := range schemas {
				if kubeMatches(rd, fs) {
					_ = kubeHash(fs.Name, kubeDistinguisher(rd, fs.Spec.DistinguisherMethod))
					break
				}
			}
		}
	})
}
