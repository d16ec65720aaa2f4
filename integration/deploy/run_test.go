package deploy

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestStagePodsBecomeReady runs each stage as its pod would: the image's
// binary with the Deployment's arguments and environment (ConfigMaps,
// Secrets and the pod name resolved, mounted files written out), against
// a NATS server running the StatefulSet's configuration with its users,
// permissions and auth callout (the three servers routed over loopback), and
// the gate against the real kube-apiserver with its ServiceAccount's token
// in place of the in-cluster configuration. The manager starts first, as
// it alone may create streams. Every stage must become ready, lead its
// stage (it is the only replica) and exit 0 on SIGTERM, and the servers
// must have refused it nothing. Meanwhile a job for Kubernetes runs
// through them to a worker run from the gate's Job (runWorkerJob).
func TestStagePodsBecomeReady(t *testing.T) {
	bin := imageBinary(t)
	objs := render(t, base)
	secrets := testSecrets(t)
	natsURL := startNATS(t, typed[appsv1.StatefulSet](t, find(t, objs, "StatefulSet", "pace-nats")), secrets)
	kubeconfig := writeKubeconfig(t, gateToken(t, objs))

	var deps []*appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deps = append(deps, typed[appsv1.Deployment](t, o))
		}
	}
	slices.SortStableFunc(deps, func(a, b *appsv1.Deployment) int { // the manager first
		return boolRank(b.Name == "pace-manager") - boolRank(a.Name == "pace-manager")
	})
	var procs []*stageProc
	for _, d := range deps {
		p := startStage(t, bin, objs, secrets, d, natsURL, kubeconfig)
		procs = append(procs, p)
		p.waitReady(t)
	}
	// A failure shows every stage's last lines, not only the one that waited.
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("%s's last log lines:\n%s", p.name, p.logTail())
			}
		}
	})
	for _, p := range procs {
		p.waitLeading(t)
	}
	runWorkerJob(t, bin, objs, secrets, natsURL, procs[0])
	for _, p := range procs {
		if p.name == "pace-gate" {
			runRedisWorkerJob(t, procs[0], p)
		}
	}
	for _, p := range procs {
		p.stop(t)
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startNATS starts the StatefulSet's three servers as its pods would run
// them, on loopback ports with routes between them in place of the
// headless Service's names, and returns their client URLs.
func startNATS(t *testing.T, ss *appsv1.StatefulSet, secrets map[string]map[string]string) string {
	t.Helper()
	n := int(*ss.Spec.Replicas)
	routes := make([]*url.URL, n)
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		clientPorts[i], routePorts[i] = freePort(t), freePort(t)
		routes[i] = &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", routePorts[i])}
	}
	var urls []string
	var servers []*server.Server
	for i := range n {
		opts := natsOptions(t, ss, fmt.Sprintf("%s-%d", ss.Name, i), natsVolumes(t, secrets), secrets)
		if len(opts.Routes) != n {
			t.Fatalf("%d routes in the configuration, %d replicas", len(opts.Routes), n)
		}
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", clientPorts[i], 0
		opts.Cluster.Host, opts.Cluster.Port, opts.Routes = "127.0.0.1", routePorts[i], routes
		opts.StoreDir, opts.PidFile = t.TempDir(), ""
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(time.Minute) {
			t.Fatalf("NATS server %s not ready", opts.ServerName)
		}
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", clientPorts[i]))
		servers = append(servers, s)
	}
	// On Kubernetes a stage that starts before JetStream has a meta leader
	// fails to provision and is restarted; here the stages wait for it.
	deadline := time.Now().Add(2 * time.Minute) // a leader ends the wait; a slow machine must not fail it
	for !slices.ContainsFunc(servers, func(s *server.Server) bool {
		return s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == n
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("no JetStream meta leader seeing %d servers within 2 minutes", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return strings.Join(urls, ",")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // a probe
	return l.Addr().(*net.TCPAddr).Port
}

// writeKubeconfig writes a kubeconfig of the test apiserver with token.
func writeKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CA}
	cfg.AuthInfos["pace-gate"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "pace-gate", Namespace: "pace"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// stageProc is a running stage process.
type stageProc struct {
	name, url, log string
	redis          string // a gate's Redis front
	cmd            *exec.Cmd
	done           chan error
}

// startStage runs the stage of Deployment d as its pod would, against the
// NATS servers at natsURL, the gate with kubeconfig.
func startStage(t *testing.T, bin string, objs []*unstructured.Unstructured, secrets map[string]map[string]string,
	d *appsv1.Deployment, natsURL, kubeconfig string) *stageProc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The Service's and the pod's addresses; a gate's Redis front on a port of its own.
	redis := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env := map[string]string{"PACE_NATS_URL": natsURL, "PACE_HTTP": addr, "PACE_REDIS_LISTEN": redis}
	if pod := d.Spec.Template.Spec; pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken {
		env["PACE_KUBECONFIG"] = kubeconfig // in place of the in-cluster configuration
	}
	p := startPod(t, bin, objs, secrets, d.Name, d.Spec.Template.Spec, env)
	p.url, p.redis = "http://"+addr, redis
	return p
}

// startPod runs the container of pod, named name, as a process: the image's
// binary (its command names pace, or it has arguments only) with the
// container's arguments and environment. ConfigMaps, Secrets and the pod
// name are resolved (Secrets with test contents to their values, others as
// in resolve), mounted files written out, $(VAR) references in the
// command expanded as the kubelet does, and override set last.
func startPod(t *testing.T, bin string, objs []*unstructured.Unstructured, secrets map[string]map[string]string,
	name string, pod corev1.PodSpec, override map[string]string) *stageProc {
	t.Helper()
	c := pod.Containers[0]
	env := map[string]string{"HOME": "/nonexistent"}
	for _, from := range c.EnvFrom {
		maps.Copy(env, typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", from.ConfigMapRef.Name)).Data)
	}
	for _, e := range c.Env {
		env[e.Name] = resolveSecret(t, secrets, e, name+"-test")
	}
	dir := t.TempDir()
	volumes := map[string]string{}
	for _, m := range c.VolumeMounts {
		volumes[m.Name] = filepath.Join(dir, m.Name)
		writeVolume(t, objs, secrets, pod.Volumes, m.Name, volumes[m.Name])
	}
	local := mountMapper(t, c.VolumeMounts, volumes)
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(c.Command) > 0 {
		if filepath.Base(argv[0]) != "pace" {
			t.Fatalf("%s: command %q: want the image's pace binary", name, c.Command)
		}
		argv = argv[1:]
	}
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = local(kubeVarRef.ReplaceAllStringFunc(a, func(ref string) string {
			if v, ok := env[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref // the kubelet leaves an unknown reference as it is
		}))
	}
	for k, v := range env {
		env[k] = local(v)
	}
	maps.Copy(env, override)

	p := &stageProc{name: name, log: filepath.Join(dir, "log"), done: make(chan error, 1)}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		p.cmd.Env = append(p.cmd.Env, k+"="+env[k])
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); _ = logf.Close() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// kubeVarRef is a $(VAR) reference in a container's command or arguments.
var kubeVarRef = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_]*\)`)

// writeVolume writes the files of the pod's volume name into dir.
func writeVolume(t *testing.T, objs []*unstructured.Unstructured, secrets map[string]map[string]string,
	vols []corev1.Volume, name, dir string) {
	t.Helper()
	i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == name })
	if i < 0 {
		t.Fatalf("no volume %s", name)
	}
	var files map[string]string
	switch v := vols[i]; {
	case v.ConfigMap != nil:
		files = typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", v.ConfigMap.Name)).Data
	case v.Secret != nil:
		if files = secrets[v.Secret.SecretName]; files == nil {
			t.Fatalf("volume %s: no test content for Secret %s", name, v.Secret.SecretName)
		}
		if len(v.Secret.Items) > 0 { // only the listed keys, at their paths
			all := files
			files = map[string]string{}
			for _, it := range v.Secret.Items {
				files[it.Path] = all[it.Key]
			}
		}
	case v.EmptyDir == nil:
		t.Fatalf("volume %s: a kind this test does not write", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// logTail is the end of the process's log, for failure messages.
func (p *stageProc) logTail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// poll calls ok every 200ms until it returns true, the process exits or
// timeout passes. ok ends the wait, so timeouts are generous: a slow
// machine (-race, two cores, packages tested in parallel) must not fail a
// test.
func (p *stageProc) poll(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before %s:\n%s", p.name, err, what, p.logTail())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within %v:\n%s", p.name, what, timeout, p.logTail())
		}
	}
}

func (p *stageProc) get(path string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close() //nolint:errcheck // read only
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// waitReady waits for the readiness probe's path to answer 200.
func (p *stageProc) waitReady(t *testing.T) {
	t.Helper()
	p.poll(t, "ready", 2*time.Minute, func() bool { code, _ := p.get("/readyz"); return code == http.StatusOK })
}

var leaderGauge = regexp.MustCompile(`(?m)^pace_stage_leader\{stage="([a-z]+)"\} ([01])$`)

// waitLeading waits until the process leads every stage it elects a leader
// for: it is the only replica.
func (p *stageProc) waitLeading(t *testing.T) {
	t.Helper()
	p.poll(t, "leading", 2*time.Minute, func() bool {
		_, body := p.get("/metrics")
		for _, m := range leaderGauge.FindAllStringSubmatch(body, -1) {
			if m[2] != "1" {
				return false
			}
		}
		return true
	})
}

// stop sends SIGTERM, as the kubelet does, and wants exit 0. Each shutdown
// step of a stage is bounded, well within the pod's 30s grace period; the
// wait here is longer, so that only a hang, not a slow machine, fails it.
func (p *stageProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("%s: exited before SIGTERM (%v):\n%s", p.name, <-p.done, p.logTail())
		return
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("%s: exit after SIGTERM: %v\n%s", p.name, err, p.logTail())
		}
		log, _ := os.ReadFile(p.log)
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, "Permissions Violation") { // auth.conf lacks a subject the stage uses
				t.Errorf("%s: %s", p.name, l)
			}
		}
	case <-time.After(2 * time.Minute):
		t.Errorf("%s: still running 2 minutes after SIGTERM\n%s", p.name, p.logTail())
	}
}
