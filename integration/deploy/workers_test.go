package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/actuator/kubernetes"
)

// workerSecretTemplate is the documented template of the worker Secret.
const workerSecretTemplate = "deploy/kubernetes/pace-worker-nats.template.yaml"

// TestWorkerSecretTemplate checks the worker Secret's template against the
// gate: it is the Secret the gate's --kube-worker-secret names, in the
// namespace whose RoleBinding lets the gate run jobs, with exactly the
// keys the gate's runtime references and placeholders for the values, and
// the apiserver accepts it (server-side dry run, strict fields). Worker
// pods run as the image's user.
func TestWorkerSecretTemplate(t *testing.T) {
	objs := render(t, base)
	data, err := os.ReadFile(filepath.Join(repo, workerSecretTemplate))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	secret := typed[corev1.Secret](t, u)
	cfg := gateRuntimeConfig(t, objs)
	binding := find(t, objs, "RoleBinding", "pace-gate")
	if secret.Name != cfg.WorkerSecret || secret.Namespace != binding.GetNamespace() {
		t.Errorf("template is Secret %s/%s; the gate references %s in %s", secret.Namespace, secret.Name, cfg.WorkerSecret, binding.GetNamespace())
	}
	keys := cfg.WorkerSecretKeys
	if len(keys) == 0 {
		keys = kubeactuator.DefaultWorkerSecretKeys()
	}
	var got []string
	for k, v := range secret.StringData {
		got = append(got, k)
		if k != "user" && !strings.HasPrefix(v, "REPLACE") {
			t.Errorf("key %s holds a value, want a placeholder", k)
		}
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
		t.Errorf("template keys %v, the gate references %v", got, keys)
	}
	if kubeactuator.WorkerUID != nonRootUID {
		t.Errorf("worker pods run as %d, the image's user is %d", kubeactuator.WorkerUID, nonRootUID)
	}

	a := newApplier(t)
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if warns, err := a.apply(context.Background(), o, false); err != nil || len(warns) > 0 {
				t.Fatalf("%s: %v %q", objectName(o), err, warns)
			}
		}
	}
	if warns, err := a.apply(context.Background(), u, true); err != nil || len(warns) > 0 {
		t.Errorf("%s: %v %q", objectName(u), err, warns)
	}
}

// workerSecrets returns the test contents of the worker Secret as
// docs/deploy.md has the operator create it: the worker's user, the
// password the NATS servers read from pace-nats-users (as resolve writes
// it) and the CA of pace-nats-tls.
func workerSecrets(secrets map[string]map[string]string) map[string]string {
	return map[string]string{"user": "pace-worker", "password": "secret:pace-nats-users:worker",
		"ca.crt": secrets["pace-nats-tls"]["ca.crt"]}
}

// runWorkerJob submits a job for Kubernetes to the manager and waits for
// the gate to create its Job with the gate's token. There being no kubelet,
// it runs the Job's pod template itself, as startPod does: `pace worker`
// must connect to the TLS NATS servers as pace-worker with the CA and the
// password of the worker Secret, and process every item; then the worker
// exits 0 on SIGTERM with no permission refused.
func runWorkerJob(t *testing.T, bin string, objs []*unstructured.Unstructured, secrets map[string]map[string]string,
	natsURL string, manager *stageProc) {
	t.Helper()
	ctx := context.Background()
	spec := map[string]any{
		"name": "workers", "mode": "batch", "deadline": "5m",
		"workload": map[string]any{"items": []string{"1", "2", "3", "4", "5"}},
		"worker": map[string]any{"image": "registry.example/pace:test",
			"command": []string{"pace", "worker", "$(PACE_JOB)", "--exec", "cat"}},
		"replicas": map[string]any{"min": 1, "max": 1},
		"actuator": map[string]any{"name": "kubernetes", "namespace": "pace-jobs"},
	}
	var created struct {
		JobID string `json:"job_id"`
	}
	if code := manager.api(t, http.MethodPost, "/submissions", spec, &created); code != http.StatusAccepted {
		t.Fatalf("submit: status %d", code)
	}
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	var job *batchv1.Job
	manager.poll(t, "the gate created the Job", 2*time.Minute, func() bool {
		j, err := admin.BatchV1().Jobs("pace-jobs").Get(ctx, kubeactuator.Name(created.JobID), metav1.GetOptions{})
		job = j
		return err == nil
	})
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"password", "ca.crt"} {
		if strings.Contains(string(raw), strings.TrimSpace(secrets["pace-worker-nats"][key])) {
			t.Errorf("the Job carries the worker Secret's %s, want a reference to it", key)
		}
	}

	// The image's PATH: --exec runs its command with sh, which a worker
	// image must hold (Pace's distroless image has none; the host has).
	w := startPod(t, bin, objs, secrets, "worker", job.Spec.Template.Spec,
		map[string]string{"PACE_NATS_URL": natsURL, "PATH": os.Getenv("PATH")})
	var status struct {
		Status  schemas.JobState `json:"status"`
		ItemsOK int              `json:"items_ok"`
	}
	w.poll(t, "job finished", 3*time.Minute, func() bool {
		manager.api(t, http.MethodGet, "/submissions/"+created.JobID, nil, &status)
		return status.Status.Final()
	})
	if status.Status != schemas.Completed || status.ItemsOK != 5 {
		t.Errorf("job %s with %d items ok, want completed with 5:\n%s", status.Status, status.ItemsOK, w.logTail())
	}
	w.stop(t)
}

// api calls the manager's job API as the test token's user with body as
// JSON, decodes the answer into out and returns the status code.
func (p *stageProc) api(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var in bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&in).Encode(body); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, &in)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close() //nolint:errcheck // read only
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Logf("%s %s: %s: %v", method, path, resp.Status, err)
	}
	return resp.StatusCode
}

// testToken is the API token of the test content of Secret pace-api-tokens.
const testToken = "test-token"
