package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestGateRBACRunsTheKubernetesRuntime applies the base's namespaces and
// RBAC for real, takes a token of the gate's ServiceAccount from the
// apiserver, and drives Pace's Kubernetes runtime with it, configured by
// the gate's arguments: the Role's verbs must be enough to create, scale,
// count and delete a job's workers in pace-jobs, which enforces the
// restricted Pod Security Standard and warns about it (no warning may
// come back), and nothing lets the gate act in another namespace or read
// Secrets (its worker pods reference the worker Secret).
func TestGateRBACRunsTheKubernetesRuntime(t *testing.T) {
	ctx := context.Background()
	objs := render(t, base)
	token := gateToken(t, objs)
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	podSecurity := &warnings{}
	cfg := &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA},
		WarningHandler: podSecurity}
	gate := kubernetes.NewForConfigOrDie(cfg)
	rtCfg := gateRuntimeConfig(t, objs, testSecrets(t))
	if rtCfg.WorkerSecret == "" {
		t.Error("the gate gives worker pods no NATS CA: want --kube-worker-secret")
	}
	if rtCfg.JobToken == nil {
		t.Error("the gate gives worker pods no NATS credentials: want --job-token-key")
	}
	rt, err := kubeactuator.New(gate, rtCfg)
	if err != nil {
		t.Fatal(err)
	}

	rec := &schemas.JobRecord{ID: "rbac-check", Spec: schemas.JobSpec{
		Worker:   schemas.WorkerSpec{Image: "registry.example/worker:1", Command: []string{"pace", "worker", "rbac-check", "--exec", "cat"}},
		Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: "pace-jobs"}}}
	for _, n := range []int{2, 3} { // the first scale creates the Job, the second patches it
		if _, err := rt.Scale(ctx, rec, n); err != nil {
			t.Fatalf("scale to %d as pace-gate: %v", n, err)
		}
	}
	job, err := admin.BatchV1().Jobs("pace-jobs").Get(ctx, kubeactuator.Name(rec.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := job.Spec.Parallelism; p == nil || *p != 3 {
		t.Errorf("parallelism = %v, want 3", p)
	}
	if _, err := rt.Running(ctx, rec); err != nil {
		t.Errorf("count running pods as pace-gate: %v", err)
	}
	ongoing := *rec
	ongoing.State = schemas.Ongoing
	if err := rt.Watch(oneJob{&ongoing}, nil, time.Second, clock.RealClock{}).Check(ctx); err != nil {
		t.Errorf("check the job's pods (failure policy) as pace-gate: %v", err)
	}
	if err := rt.Terminate(ctx, rec); err != nil {
		t.Errorf("terminate as pace-gate: %v", err)
	}
	for _, w := range podSecurity.take() {
		t.Errorf("worker Job: warning: %s", w)
	}

	elsewhere := *rec
	elsewhere.Spec.Actuator.Namespace = "default"
	if _, err := rt.Scale(ctx, &elsewhere, 1); !apierrors.IsForbidden(err) {
		t.Errorf("scale in namespace default as pace-gate: err = %v, want Forbidden", err)
	}
	// The pod watch follows worker pods' logs (no pod runs here to read).
	logs := authzv1.ResourceAttributes{Namespace: "pace-jobs", Verb: "get", Resource: "pods", Subresource: "log"}
	if review, err := gate.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &logs}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	} else if !review.Status.Allowed {
		t.Errorf("pace-gate may not get pods/log in pace-jobs: %s", review.Status.Reason)
	}
	for _, attr := range []authzv1.ResourceAttributes{
		{Namespace: "pace-jobs", Verb: "get", Resource: "secrets"},
		{Namespace: "pace", Verb: "list", Resource: "pods"},
		{Namespace: "pace-jobs", Verb: "create", Resource: "pods"},
	} {
		review, err := gate.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed {
			t.Errorf("pace-gate may %s %s in %s: want denied", attr.Verb, attr.Resource, attr.Namespace)
		}
	}
}

// gateToken applies the namespaces and RBAC objects of objs for real and
// returns a token of the gate's ServiceAccount, issued by the apiserver.
func gateToken(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	ctx := context.Background()
	a := newApplier(t)
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "RoleBinding":
			if warns, err := a.apply(ctx, o, false); err != nil || len(warns) > 0 {
				t.Fatalf("%s: %v %q", objectName(o), err, warns)
			}
		}
	}
	expiry := int64(600)
	tok, err := kubernetes.NewForConfigOrDie(cp.Admin).CoreV1().ServiceAccounts("pace").CreateToken(ctx, "pace-gate",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// gateRuntimeConfig is the Kubernetes runtime's configuration that the
// gate Deployment's arguments give, its job tokens made with the key of
// secrets that --job-token-key reads.
func gateRuntimeConfig(t *testing.T, objs []*unstructured.Unstructured, secrets map[string]map[string]string) kubeactuator.Config {
	t.Helper()
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "pace-gate"))
	var cfg kubeactuator.Config
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--job-token-key":
			secret, key := secretFile(t, d, value)
			jobs, err := natsauth.NewJobTokens([]byte(secrets[secret][key]))
			if err != nil {
				t.Fatalf("--job-token-key: Secret %s key %s: %v", secret, key, err)
			}
			cfg.JobToken = jobs.Mint
		case "--pod-nats-url":
			cfg.NATSURL = value
		case "--kube-worker-secret":
			cfg.WorkerSecret = value
		case "--kube-worker-secret-keys":
			cfg.WorkerSecretKeys = strings.Split(value, ",")
		}
	}
	return cfg
}

// oneJob lists one job record and fails nothing.
type oneJob struct{ rec *schemas.JobRecord }

func (j oneJob) List(context.Context) ([]*schemas.JobRecord, error) {
	return []*schemas.JobRecord{j.rec}, nil
}

func (j oneJob) AnnounceReplica(context.Context, string, string, time.Time) error { return nil }

func (j oneJob) Fail(_ context.Context, job, reason string) error {
	return fmt.Errorf("job %s failed (%s), want none", job, reason)
}
