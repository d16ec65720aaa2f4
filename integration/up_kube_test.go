package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/internal/localtest"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // a probe
	return l.Addr().String()
}

// writeKubeconfig writes a kubeconfig for alice on cp.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, cp.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: alice, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: alice}}]
current-context: test
`, cp.URL, ca, kubetest.UserToken)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUpRunsKubernetesJobs submits a job with the kubernetes actuator to
// `pace up --kubernetes`: the manager starts it, the actuator's request
// passes the APF gate and the Job appears with the initial parallelism; a
// terminate through the API deletes it.
func TestUpRunsKubernetesJobs(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin)
	const ns = "pace-e2e"
	grantActuator(t, admin, ns, kubetest.User)

	bin, err := localtest.Program("pace", ".", "github.com/pace-platform/pace/cmd/pace")
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(bin, "up", "--data", t.TempDir(), "--http", freeAddr(t), "--nats-listen", freeAddr(t),
		"--kubernetes", "--kubeconfig", writeKubeconfig(t), "--pod-nats-url", "nats://pace-nats:4222")
	var stderr bytes.Buffer
	up.Stderr = &stderr
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Process.Kill(); _ = up.Wait() })
	api := ""
	for sc := bufio.NewScanner(stdout); api == "" && sc.Scan(); {
		if i := strings.Index(sc.Text(), "http://"); i >= 0 {
			api = sc.Text()[i:]
		}
	}
	if api == "" {
		t.Fatalf("pace up printed no HTTP URL:\n%s", stderr.String())
	}

	spec := fmt.Sprintf(`{"name": "render", "mode": "batch", "deadline": "10m",
		"workload": {"items": ["a", "b", "c"]},
		"worker": {"image": "registry.example/render:1", "command": ["pace", "worker"]},
		"replicas": {"min": 1, "max": 4, "initial": 2},
		"actuator": {"name": "kubernetes", "namespace": %q}}`, ns)
	resp, err := http.Post(api+"/submissions", "application/json", strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || created.JobID == "" {
		t.Fatalf("submit: %s, job %q\n%s", resp.Status, created.JobID, stderr.String())
	}
	name := kubeactuator.Name(created.JobID)
	bustest.Eventually(t, 30*time.Second, "the Job with the initial parallelism", func() bool {
		j, err := admin.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Spec.Parallelism != nil && *j.Spec.Parallelism == 2
	})

	req, _ := http.NewRequest(http.MethodPut, api+"/submissions/"+created.JobID+"/terminate", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("terminate: %s", resp.Status)
	}
	bustest.Eventually(t, 30*time.Second, "the Job deleted", func() bool {
		j, err := admin.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && j.DeletionTimestamp != nil)
	})
}
