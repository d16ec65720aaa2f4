package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
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

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/bus/rediswq/rediswqtest"
	"github.com/pace-platform/pace/schemas"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// workerSecretTemplate is the documented template of the worker Secret.
const workerSecretTemplate = "deploy/kubernetes/pace-worker-nats.template.yaml"

// TestWorkerSecretTemplate checks the worker Secret's template against the
// gate: it is the Secret the gate's --kube-worker-secret names, in the
// namespace whose RoleBinding lets the gate run jobs, with exactly the
// keys the gate's runtime references (no credentials: the workers log in
// with their job's token) and placeholders for the values, and the
// apiserver accepts it (server-side dry run, strict fields). Worker pods
// run as the image's user.
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
	cfg := gateRuntimeConfig(t, objs, testSecrets(t))
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
		if !strings.HasPrefix(v, "REPLACE") {
			t.Errorf("key %s holds a value, want a placeholder", k)
		}
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
		t.Errorf("template keys %v, the gate references %v", got, keys)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Errorf("the gate's worker Secret: %v", errs.ToAggregate())
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

// runWorkerJob submits a job for Kubernetes to the manager and waits for
// the gate to create its Job with the gate's token: its pods get the job's
// token, made with the key of Secret pace-job-token, and no other
// credentials. There being no kubelet, it runs the Job's pod template
// itself, as startPod does: `pace worker` must connect to the TLS NATS
// servers with that token, which the manager's authorization service
// admits, and the CA of the worker Secret, and process every item; then
// the worker exits 0 on SIGTERM with no permission refused. The tenant
// then reads the job's results on the bus with its API token
// (checkTenantOnBus).
func runWorkerJob(t *testing.T, bin string, objs []*unstructured.Unstructured, secrets map[string]map[string]string,
	natsURL string, manager *stageProc) {
	t.Helper()
	id, job := submitKubeJob(t, manager, []string{"1", "2", "3", "4", "5"}, map[string]any{"image": "registry.example/pace:test",
		"command": []string{"pace", "worker", "$(PACE_JOB)", "--exec", "cat"}})
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), strings.TrimSpace(secrets["pace-worker-nats"]["ca.crt"])) {
		t.Error("the Job carries the worker Secret's ca.crt, want a reference to it")
	}
	jobs, err := natsauth.NewJobTokens([]byte(secrets["pace-job-token"]["job-token.key"]))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if got, want := env["PACE_TOKEN"], jobs.Mint(id); got != want {
		t.Errorf("worker pods' PACE_TOKEN = %q, want the job's token %q", got, want)
	}
	for _, k := range []string{"PACE_NATS_USER", "PACE_NATS_PASSWORD", "PACE_NATS_CREDS", "PACE_NATS_NKEY"} {
		if _, ok := env[k]; ok {
			t.Errorf("worker pods get %s: want their job's token alone", k)
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
		manager.api(t, http.MethodGet, "/submissions/"+id, nil, &status)
		return status.Status.Final()
	})
	if status.Status != schemas.Completed || status.ItemsOK != 5 {
		t.Errorf("job %s with %d items ok, want completed with 5:\n%s", status.Status, status.ItemsOK, w.logTail())
	}
	w.stop(t)
	checkTenantOnBus(t, secrets, natsURL, id, jobs)
}

// submitKubeJob submits a batch job of items for Kubernetes with worker as
// its worker spec, and waits for the gate to create its Job.
func submitKubeJob(t *testing.T, manager *stageProc, items []string, worker map[string]any) (string, *batchv1.Job) {
	t.Helper()
	spec := map[string]any{
		"name": "workers", "mode": "batch", "deadline": "5m", "workload": map[string]any{"items": items},
		"worker": worker, "replicas": map[string]any{"min": 1, "max": 1},
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
		j, err := admin.BatchV1().Jobs("pace-jobs").Get(context.Background(), kubeactuator.Name(created.JobID), metav1.GetOptions{})
		job = j
		return err == nil
	})
	return created.JobID, job
}

// runRedisWorkerJob submits a job for Kubernetes whose worker is the
// Asperathos-style Redis worker of examples/asperathos (redis-py, the
// published rediswq library), and runs the command of the Job the gate
// made, with the pod's environment: the Redis front's address (the
// Service's name, which only the cluster resolves, replaced by the gate's
// local port) and the job's token as the queue's name. Beside it runs the
// go-redis worker, giving every item back once. The gate's front logs in
// to the TLS NATS servers with that token; every item gets one result.
func runRedisWorkerJob(t *testing.T, manager, gate *stageProc) {
	t.Helper()
	python, worker := rediswqtest.Python(t), rediswqtest.Worker(t)
	items := []string{"p", "q", "r", "s", "t", "u", "v", "w"}
	id, job := submitKubeJob(t, manager, items,
		map[string]any{"image": "registry.example/asperathos-worker:1", "command": []string{python, worker}, "protocol": "redis"})
	c := job.Spec.Template.Spec.Containers[0]
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}
	for _, e := range c.Env {
		switch e.Name {
		case "REDIS_HOST":
			if e.Value != "pace-redis.pace.svc" {
				t.Errorf("REDIS_HOST = %q, want the Service pace-redis", e.Value)
			}
			host, _, _ := strings.Cut(gate.redis, ":")
			env = append(env, "REDIS_HOST="+host)
		case "REDIS_PORT":
			_, port, _ := strings.Cut(gate.redis, ":")
			env = append(env, "REDIS_PORT="+port)
		default:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	goredis := exec.Command(rediswqtest.GoWorker(t))
	goredis.Env = append(env, "GIVE_BACK=1", "CONCURRENCY=2", "WORK_SECONDS=0.1")
	var goOut strings.Builder
	goredis.Stdout, goredis.Stderr = &goOut, &goOut
	if err := goredis.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.Command[0], c.Command[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Redis worker: %v\n%s\ngate:\n%s", err, out, gate.logTail())
	}
	if err := goredis.Wait(); err != nil {
		t.Fatalf("the go-redis worker: %v\n%s\ngate:\n%s", err, goOut.String(), gate.logTail())
	}
	var status struct {
		Status  schemas.JobState `json:"status"`
		ItemsOK int              `json:"items_ok"`
	}
	manager.poll(t, "job finished", 2*time.Minute, func() bool {
		manager.api(t, http.MethodGet, "/submissions/"+id, nil, &status)
		return status.Status.Final()
	})
	if status.Status != schemas.Completed || status.ItemsOK != len(items) {
		t.Errorf("job %s with %d items ok, want completed with %d; the workers said:\n%s\n%s", status.Status, status.ItemsOK, len(items), out, goOut.String())
	}
}

// checkTenantOnBus connects to the NATS servers as the test token's tenant,
// who owns job, and reads its five results: the manager's authorization
// service admits the API's tokens. Another job's worker token reads
// nothing of job, and the static users of earlier versions are refused.
func checkTenantOnBus(t *testing.T, secrets map[string]map[string]string, natsURL, job string, jobs *natsauth.JobTokens) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte(secrets["pace-nats-tls"]["ca.crt"]), 0o600); err != nil {
		t.Fatal(err)
	}
	connect := func(opt bus.Option) (*bus.Client, error) {
		return bus.Connect(ctx, natsURL, bus.WithTLS(ca, "", ""), opt, bus.WithConnectTimeout(time.Minute))
	}
	tenant, err := connect(bus.WithTokenAuth(testToken))
	if err != nil {
		t.Fatalf("the tenant connects with its API token: %v", err)
	}
	defer tenant.Close(ctx) //nolint:errcheck // read only
	if results, err := tenant.Outputs().StoredResults(ctx, job); err != nil || len(results) != 5 {
		t.Errorf("the tenant reads %d results of its job (%v), want 5", len(results), err)
	}
	other, err := connect(bus.WithTokenAuth(jobs.Mint("another-job")))
	if err != nil {
		t.Fatalf("another job's worker connects: %v", err)
	}
	defer other.Close(ctx) //nolint:errcheck // read only
	if _, err := other.Outputs().StoredResults(ctx, job); !errors.Is(err, bus.ErrNotPermitted) {
		t.Errorf("another job's worker reads the job's results: %v, want ErrNotPermitted", err)
	}
	for _, user := range []string{"pace-worker", "pace-client"} {
		c, err := connect(bus.WithUserPassword(user, "secret:pace-nats-users:"+strings.TrimPrefix(user, "pace-")))
		if err == nil {
			_ = c.Close(ctx)
			t.Errorf("%s connected: want workers and tenants by token only", user)
		}
	}
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
