// Package pods runs Pace's Kubernetes path on a real node: a kube-apiserver,
// controller-manager and scheduler (integration/kubetest), containerd, runc
// and a kubelet on this machine, and worker images built by the tests
// (integration/kubetest/ociarchive). Pods are real containers; pace up
// reaches them, and they reach its NATS and Redis front, on the node's
// bridge (kubetest.Gateway). One node serves the whole package.
package pods

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/integration/kubetest"
	"github.com/pace-platform/pace/internal/localtest"
)

// Images the tests import into the node (kubetest.ImportWorkerImages).
const (
	paceImage        = kubetest.PaceImage
	redisWorkerImage = kubetest.RedisWorkerImage
)

var (
	cp      *kubetest.ControlPlane
	node    *kubetest.Node
	admin   kubernetes.Interface
	paceBin string // the static pace, also run on the host
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1 // a missing real component fails the package, it does not skip it
	}
	bin, err := kubetest.Binaries()
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "pace-pods")
	if err != nil {
		return fail(err)
	}
	t0 := time.Now()
	if cp, err = kubetest.Start(bin, dir); err != nil {
		return fail(err)
	}
	defer cp.Stop()
	tControlPlane := time.Since(t0)
	if node, err = cp.StartRealNode(bin, log); err != nil {
		return fail(err)
	}
	defer func() {
		t := time.Now()
		node.Stop()
		log.Info("real node stopped", "teardown", time.Since(t).Round(time.Millisecond))
	}()
	log.Info("real node ready", "control_plane", tControlPlane.Round(time.Millisecond), "node", node.Ready.Round(time.Millisecond))
	removeEarlierRuns(dir, log) // the node's lock is held: no other run uses them
	admin = kubernetes.NewForConfigOrDie(cp.Admin)
	t1 := time.Now()
	programs, err := localtest.Programs() // kept: the next run links nothing unchanged
	if err != nil {
		return fail(err)
	}
	if paceBin, err = node.ImportWorkerImages(programs); err != nil {
		return fail(err)
	}
	log.Info("worker images built and imported", "took", time.Since(t1).Round(time.Millisecond))
	code := m.Run()
	if code == 0 {
		_ = os.RemoveAll(dir)
	}
	return code
}

// removeEarlierRuns deletes the directories earlier runs left: a run that
// fails keeps its own (the servers' logs, the worker images) for whoever
// looks into it, until the next run holds the node.
func removeEarlierRuns(keep string, log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pace-pods*"))
	for _, d := range dirs {
		if d == keep {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			log.Warn("an earlier run's directory not removed", "dir", d, "err", err)
		}
	}
}

// paceUp is a pace up whose Kubernetes jobs run on the real node, with its
// NATS and Redis front on the bridge's gateway address.
type paceUp struct {
	cmd      *exec.Cmd
	stderr   *bytes.Buffer
	natsURL  string
	httpURL  string
	redis    string
	waitDone chan error
}

// startUp starts a pace up that authenticates tenants (alice-token) and
// gives worker pods their job's token.
func startUp(t *testing.T, extra ...string) *paceUp {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1\nroot-token,root,0,pace:admins\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	addrs := freeGatewayAddrs(t, 2)
	natsAddr, redisAddr := addrs[0], addrs[1]
	u := &paceUp{stderr: &bytes.Buffer{}, natsURL: "nats://" + natsAddr, redis: redisAddr, waitDone: make(chan error, 1)}
	args := append([]string{"up", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--token-file", tokens,
		"--nats-listen", natsAddr, "--redis-listen", redisAddr, "--actuator", "none", "--kubernetes", "--kubeconfig", kubeconfig,
		"--pod-nats-url", u.natsURL, "--pod-redis-addr", redisAddr,
		"--log-format", "json"}, extra...)
	u.cmd = exec.Command(paceBin, args...)
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	u.cmd.Stderr = u.stderr
	stdout, err := u.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { u.waitDone <- u.cmd.Wait() }()
	t.Cleanup(func() {
		_ = u.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-u.waitDone:
		case <-time.After(time.Minute):
			_ = u.cmd.Process.Kill()
			<-u.waitDone
		}
		if t.Failed() {
			t.Logf("pace up's log:\n%s", u.stderr)
		}
	})
	lines := bufio.NewScanner(stdout)
	for u.httpURL == "" && lines.Scan() {
		if url, ok := strings.CutPrefix(lines.Text(), "HTTP: "); ok {
			u.httpURL = url
		}
	}
	if u.httpURL == "" {
		t.Fatalf("pace up printed no HTTP URL:\n%s", u.stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return u
}

// freeGatewayAddrs returns n distinct free ports on the bridge's gateway address.
func freeGatewayAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs { // every probe held until all are chosen: n distinct ports
		l, err := net.Listen("tcp", net.JoinHostPort(kubetest.Gateway, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() //nolint:errcheck // a probe
		addrs[i] = l.Addr().String()
	}
	return addrs
}

// pace runs the pace CLI as alice against u's API (api true) or bus and
// returns its stdout.
func (u *paceUp) pace(t *testing.T, api bool, args ...string) string {
	t.Helper()
	if api {
		args = append(args, "--api", u.httpURL, "--token", "alice-token")
	}
	out, errOut, err := u.try(args...)
	if err != nil {
		t.Fatalf("pace %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func (u *paceUp) try(args ...string) (string, string, error) {
	cmd := exec.Command(paceBin, args...)
	cmd.Env = append(os.Environ(), "PACE_NATS_URL="+u.natsURL, "PACE_TOKEN=alice-token")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return string(out), stderr.String(), err
}

// submit submits a JSON job document and returns the job's id.
func (u *paceUp) submit(t *testing.T, doc string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(u.pace(t, true, "submit", file))
	if id == "" {
		t.Fatal("submit printed no job id")
	}
	return id
}

// status returns the job's view.
func (u *paceUp) status(t *testing.T, id string) map[string]any {
	t.Helper()
	var v map[string]any
	out := u.pace(t, true, "status", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("status %s: %q: %v", id, out, err)
	}
	return v
}

// waitFinal waits until the job has ended and returns its view; each of
// observe runs before each look at the job (to count its containers, say).
func (u *paceUp) waitFinal(t *testing.T, id string, wait time.Duration, observe ...func()) map[string]any {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, o := range observe {
			o()
		}
		v := u.status(t, id)
		if s := v["status"]; s != "created" && s != "ongoing" {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not finished after %s: %v\npods: %s", id, wait, v, podSummary(t))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// namespace creates a namespace named name-XXXXX that enforces the restricted Pod Security
// Standard, as Pace's pods must pass it.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	created, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created.Name
}

// podSummary lists every pod's phase and container states, for failures.
func podSummary(t *testing.T) string {
	pods, err := admin.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s/%s %s %s", p.Namespace, p.Name, p.Status.PodIP, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, " waiting %s %s", s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, " exited %d %s", s.State.Terminated.ExitCode, s.State.Terminated.Message)
				tail := int64(5)
				out, err := admin.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(context.Background())
				fmt.Fprintf(&b, "; log: %q %v", out, err)
			case s.State.Running != nil:
				b.WriteString(" running")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
