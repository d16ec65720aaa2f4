package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/integration/kubetest"
)

// TestProxyStreams runs kubectl exec, attach and port-forward through pace
// gate proxy (impersonating its callers upstream) to a pod of a fake node,
// over WebSocket (kubectl's default) and over SPDY/3.1. kwok plays the
// node's kubelet: it runs exec'd commands on this machine, attaches to a log
// file and forwards the pod's ports to a local echo server, so every stream
// crosses kubectl → proxy → kube-apiserver → kwok and back. The caller is
// refused by the cluster, by name, until RBAC allows it.
func TestProxyStreams(t *testing.T) {
	t.Parallel()
	kubectl := kubectlBin(t)
	cp, upstreamCA := startKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(cp.Admin)
	_, proxyToken := proxyIdentity(ctx, t, cp, kc)

	echo := echoServer(t)
	attachLog := filepath.Join(t.TempDir(), "attach.log")
	if err := os.WriteFile(attachLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, echoPort, _ := net.SplitHostPort(echo)
	startKwok(ctx, t, cp, fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata: {name: run-here}
spec:
  execs: [{local: {workDir: %q}}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata: {name: attach-log}
spec:
  attaches: [{logsFile: %q}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata: {name: to-echo}
spec:
  forwards: [{target: {port: %s, address: 127.0.0.1}}]
`, t.TempDir(), attachLog, echoPort))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shell", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "main", Image: "none",
			Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "pod running", func() (bool, string) {
		p, err := kc.CoreV1().Pods("default").Get(ctx, "shell", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})

	tlsFiles := bustest.TLS(t)
	url := runProxy(t, "--upstream", cp.URL, "--upstream-ca", upstreamCA, "--tls-cert", tlsFiles.Cert, "--tls-key", tlsFiles.Key,
		"--token-file", filepath.Join(cp.Dir, "tokens.csv"), "--impersonate", "--upstream-token-file", proxyToken)
	kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: alice, user: {token: %q}}]
contexts: [{name: proxy, context: {cluster: proxy, user: alice, namespace: default}}]
current-context: proxy
`, url, tlsFiles.CA, kubetest.UserToken), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, env []string, stdin string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "-v=4"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	// Impersonated upstream: the cluster refuses alice's exec by name until
	// RBAC allows it.
	bind := func(name string, rules ...rbacv1.PolicyRule) {
		t.Helper()
		if _, err := kc.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: kubetest.User}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("pod-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}})
	eventually(ctx, t, "exec refused as alice", func() (bool, string) {
		_, stderr, err := run(ctx, nil, "", "exec", "shell", "--", "true")
		return err != nil && strings.Contains(stderr, `User "alice" cannot create resource "pods/exec"`), stderr
	})
	bind("debugger", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/attach", "pods/portforward"},
		Verbs: []string{"get", "create"}})

	for _, proto := range []struct {
		name string
		on   string // kubectl's KUBECTL_*_WEBSOCKETS
	}{{"websocket", "true"}, {"spdy", "false"}} {
		env := []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=" + proto.on, "KUBECTL_PORT_FORWARD_WEBSOCKETS=" + proto.on}
		// kubectl falls back from WebSocket to SPDY when the upgrade fails,
		// and says so at -v=4: a fallback fails the WebSocket case.
		noFallback := func(t *testing.T, stderr string) {
			t.Helper()
			if strings.Contains(strings.ToLower(stderr), "fallback") {
				t.Errorf("kubectl fell back from WebSocket:\n%s", stderr)
			}
		}
		t.Run(proto.name+"/exec", func(t *testing.T) {
			var (
				stdout, stderr string
				err            error
			)
			eventually(ctx, t, "exec allowed", func() (bool, string) { // RBAC's cache learns the binding
				stdout, stderr, err = run(ctx, env, "from stdin\n", "exec", "-i", "shell", "--", "sh", "-c", "echo out; echo err >&2; head -n 1")
				return !strings.Contains(stderr, "forbidden"), stderr
			})
			if err != nil || stdout != "out\nfrom stdin\n" || !strings.Contains(stderr, "err\n") {
				t.Errorf("exec: %v, stdout %q, stderr %q; want out, stdin echoed, and err", err, stdout, stderr)
			}
			noFallback(t, stderr)
			if _, stderr, err := run(ctx, env, "", "exec", "shell", "--", "sh", "-c", "exit 3"); err == nil || !strings.Contains(stderr, "exit status 3") {
				t.Errorf("exit 3: %v %s, want the command's failure (kwok reports it as an error, not as an exit code)", err, stderr)
			}
		})
		t.Run(proto.name+"/attach", func(t *testing.T) {
			actx, stop := context.WithCancel(ctx)
			defer stop()
			cmd := exec.CommandContext(actx, kubectl, "--kubeconfig", kubeconfig, "-v=4", "attach", "shell", "-c", "main")
			cmd.Env = append(os.Environ(), env...)
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stop(); _ = cmd.Wait() }()
			seen := make(chan string, 1)
			go func() {
				lines := bufio.NewScanner(out)
				for lines.Scan() {
					if strings.HasPrefix(lines.Text(), "attached "+proto.name) {
						seen <- lines.Text()
						return
					}
				}
			}()
			// Lines written after kwok attached reach kubectl; write until one does.
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-seen:
					noFallback(t, stderr.String())
					return
				case <-tick.C:
					if err := appendCRILog(attachLog, fmt.Sprintf("attached %s %d", proto.name, i)); err != nil {
						t.Fatal(err)
					}
				case <-ctx.Done():
					t.Fatalf("attach saw no line: %s", stderr.String())
				}
			}
		})
		t.Run(proto.name+"/port-forward", func(t *testing.T) {
			pctx, stop := context.WithCancel(ctx)
			defer stop()
			cmd := exec.CommandContext(pctx, kubectl, "--kubeconfig", kubeconfig, "-v=4", "port-forward", "--address", "127.0.0.1", "pod/shell", ":80")
			cmd.Env = append(os.Environ(), env...)
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stop(); _ = cmd.Wait() }()
			var local string
			lines := bufio.NewScanner(out)
			for local == "" && lines.Scan() { // Forwarding from 127.0.0.1:NNNN -> 80
				if f := strings.Fields(lines.Text()); len(f) == 5 && f[0] == "Forwarding" {
					local = f[2]
				}
			}
			if local == "" {
				t.Fatalf("kubectl port-forward printed no local address: %s", stderr.String())
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			for _, msg := range []string{"ping " + proto.name, "again " + proto.name} { // two connections over one stream
				conn, err := net.DialTimeout("tcp", local, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := conn.Write([]byte(msg + "\n")); err != nil {
					t.Fatal(err)
				}
				got, err := bufio.NewReader(conn).ReadString('\n')
				_ = conn.Close()
				if err != nil || got != msg+"\n" {
					t.Fatalf("through the forward: %q %v, want %q echoed\n%s", got, err, msg, stderr.String())
				}
			}
			noFallback(t, stderr.String())
		})
	}
}

// kubectlBin returns kubectl: $KUBECTL, else the one on $PATH, else the one
// integration/kubetools/build.sh built beside the test's kube binaries.
func kubectlBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	bin, err := kubetest.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(bin, "kubectl")
}

// startKwok registers node kwok-node-0 and runs kwok as its kubelet, with
// kwok's pod and node stages and the extra configuration config.
func startKwok(ctx context.Context, t *testing.T, cp *kubetest.ControlPlane, config string) {
	t.Helper()
	bin, err := kubetest.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(extra, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cp.Admin)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("10")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0", Labels: map[string]string{"type": "kwok"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}}
	if _, err := kc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	port := freeAddr(t)[len("127.0.0.1:"):]
	log, err := os.Create(filepath.Join(cp.Dir, "kwok.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "kwok"), "--kubeconfig="+kubeconfig, "--manage-all-nodes=true",
		"--config="+filepath.Join(bin, "kwok-stages.yaml"), "--config="+extra,
		"--cidr=10.244.0.0/16", "--node-ip=127.0.0.1", "--node-port="+port, "--server-address=127.0.0.1:"+port)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("kwok log:\n%s", b)
		}
	})
}

// echoServer accepts TCP connections on loopback and echoes each back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }() //nolint:errcheck // test echo
		}
	}()
	return ln.Addr().String()
}

// appendCRILog appends a stdout line in the container runtime's log format.
func appendCRILog(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), line); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// eventually polls cond every 100 ms until it holds, failing the test with
// cond's last word when ctx ends first.
func eventually(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never (last: %s)", what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
