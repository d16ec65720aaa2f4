package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestJobsRunOnTheirRegisteredCluster registers two clusters as Asperathos
// users do (a kubeconfig each: east logs in as alice, who may run workers in
// east-ns only; west as an admin) and checks that each job is actuated with
// its own cluster's client: the job naming east is refused outside east-ns,
// the one naming west is not; a job naming none goes to the active cluster,
// else the gate's own; a changed registration takes effect at the next
// request, and an unknown cluster is an error.
func TestJobsRunOnTheirRegisteredCluster(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	grantActuator(t, admin, "east-ns", kubetest.User)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "west-ns", Labels: restricted}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := bustest.Client(t, bustest.Server(t))
	register := func(name, token string, active bool) { registerCluster(t, c, name, token, active) }
	register("east", kubetest.UserToken, false)
	register("west", kubetest.AdminToken, false)

	cfg := kubeactuator.Config{NATSURL: "nats://pace-nats:4222"}
	log := slog.New(slog.DiscardHandler)
	// The gate's own kubeconfig: alice's, so that a job on it is told apart
	// from one on west.
	def := newKubeRuntime(t, kubernetes.NewForConfigOrDie(cp.User), cfg, log)
	clusters := kubeactuator.NewClusters(def, c, cfg, kubeactuator.WithLogger(log))
	job := func(id, cluster, ns string) *schemas.JobRecord {
		return &schemas.JobRecord{ID: id, State: schemas.Ongoing, Spec: schemas.JobSpec{
			Worker:   schemas.WorkerSpec{Image: "registry.example/worker:1"},
			Actuator: schemas.ActuatorSpec{Name: schemas.KubernetesActuator, Namespace: ns, Cluster: cluster}}}
	}
	scaled := func(rec *schemas.JobRecord) error {
		_, err := clusters.Scale(ctx, rec, 1)
		return err
	}
	if err := scaled(job("on-east", "east", "east-ns")); err != nil {
		t.Errorf("job on east in east-ns: %v", err)
	}
	if err := scaled(job("east-elsewhere", "east", "west-ns")); !apierrors.IsForbidden(err) {
		t.Errorf("job on east in west-ns: %v, want Forbidden (alice's kubeconfig)", err)
	}
	if err := scaled(job("on-west", "west", "west-ns")); err != nil {
		t.Errorf("job on west in west-ns: %v", err)
	}
	if err := scaled(job("on-default", "", "west-ns")); !apierrors.IsForbidden(err) {
		t.Errorf("job on no cluster, none active, in west-ns: %v, want Forbidden (the gate's own kubeconfig)", err)
	}
	if err := scaled(job("nowhere", "nope", "west-ns")); !errors.Is(err, kubeactuator.ErrNoCluster) {
		t.Errorf("job on an unregistered cluster: %v, want ErrNoCluster", err)
	}
	for _, j := range []struct{ ns, name string }{{"east-ns", "on-east"}, {"west-ns", "on-west"}} {
		if _, err := admin.BatchV1().Jobs(j.ns).Get(ctx, kubeactuator.Name(j.name), metav1.GetOptions{}); err != nil {
			t.Errorf("Job of %s: %v", j.name, err)
		}
	}

	register("west", kubetest.AdminToken, true) // now the active cluster
	if err := scaled(job("on-default", "", "west-ns")); err != nil {
		t.Errorf("job on no cluster, west active: %v", err)
	}
	register("east", kubetest.AdminToken, false) // east's kubeconfig changed
	if err := scaled(job("east-elsewhere", "east", "west-ns")); err != nil {
		t.Errorf("job on east in west-ns after east's kubeconfig changed to an admin's: %v", err)
	}
	if err := clusters.Terminate(ctx, job("on-east", "east", "east-ns")); err != nil {
		t.Errorf("terminate on east: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := admin.BatchV1().Jobs("east-ns").Get(ctx, kubeactuator.Name("on-east"), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Job of on-east still there after terminate: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// registerCluster registers the test's kube-apiserver as cluster name,
// logging in with token, as POST /submissions/cluster stores it.
func registerCluster(t *testing.T, c *bus.Client, name, token string, active bool) {
	t.Helper()
	ctx := context.Background()
	kv, err := c.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.Prefix().Bucket(schemas.BucketClusters)})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(schemas.Cluster{Name: name, Config: kubeconfig(cp.URL, cp.CA, token), Active: active})
	if _, err := kv.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
}

// kubeconfig is a kubeconfig for server, trusting ca, logging in with token.
func kubeconfig(server string, ca []byte, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: user
  user:
    token: %s
contexts:
- name: context
  context:
    cluster: cluster
    user: user
current-context: context
`, server, base64.StdEncoding.EncodeToString(ca), token)
}
