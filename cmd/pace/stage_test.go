package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
	"github.com/pace-platform/pace/stages/visualizer"
)

// stageProc is a running `pace stage` process.
type stageProc struct {
	identity string
	url      string // its HTTP base URL
	logFile  string
	cmd      *exec.Cmd
	done     chan error
}

// startStage runs `pace stage name` against natsURL with a 2s lease, as
// identity; it is killed when the test ends, and its log shown if it failed.
func startStage(t *testing.T, natsURL, name, identity string, extra ...string) *stageProc {
	t.Helper()
	addr := freeAddr(t)
	p := &stageProc{identity: identity, url: "http://" + addr, logFile: filepath.Join(t.TempDir(), identity+".log"), done: make(chan error, 1)}
	log, err := os.Create(p.logFile)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"stage", name, "--nats", natsURL, "--http", addr, "--identity", identity,
		"--lease-ttl", "2s", "--log-format", "json"}, extra...)
	p.cmd = exec.Command(paceBin, args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); _ = log.Close() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(p.logFile)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s log (last lines):\n%s", identity, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return p
}

func (p *stageProc) get(path string) (int, string) {
	resp, err := http.Get(p.url + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ready reports whether /readyz answers 200, failing the test if the
// process has exited.
func (p *stageProc) ready(t *testing.T) func() bool {
	return func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited: %v", p.identity, err)
		default:
		}
		code, _ := p.get("/readyz")
		return code == http.StatusOK
	}
}

// leading reads pace_stage_leader of stage from the process's metrics.
func (p *stageProc) leading(stage string) bool {
	_, body := p.get("/metrics")
	return strings.Contains(body, fmt.Sprintf("pace_stage_leader{stage=%q} 1", stage))
}

// stop sends SIGTERM and requires a clean exit.
func (p *stageProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Errorf("%s exit after SIGTERM: %v", p.identity, err)
		}
	case <-time.After(2 * time.Minute): // a stop ends the wait at once; a slow machine must not fail it
		t.Errorf("%s did not stop within 2 minutes of SIGTERM", p.identity)
	}
}

// leaderOf returns the replica leading stage, waiting for one.
func leaderOf(t *testing.T, stage string, replicas ...*stageProc) (leader, standby *stageProc) {
	t.Helper()
	bustest.Eventually(t, 30*time.Second, "a "+stage+" leader", func() bool {
		n := 0
		for _, r := range replicas {
			if r.leading(stage) {
				n, leader = n+1, r
			} else {
				standby = r
			}
		}
		return n == 1
	})
	return leader, standby
}

// TestStagesRunAJobAndSurviveTheGateLeadersDeath runs Pace as separate
// stage processes on an external NATS server, with two replicas of the
// manager and of the gate: a job submitted to the manager that does not
// lead its lifecycle completes, and so does a job whose gate leader (and
// with it the local workers) is SIGKILLed midway, once the standby takes
// over and restores the workers.
func TestStagesRunAJobAndSurviveTheGateLeadersDeath(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs ten processes and a job of several seconds")
	}
	natsURL := bustest.ServerAt(t, t.TempDir(), "127.0.0.1:0").ClientURL()
	// Every stage of the registry, two replicas of the manager and the gate.
	var all []*stageProc
	replicas := map[string][]*stageProc{}
	for _, d := range host.Defs() {
		n := 1
		if d.Name == "manager" || d.Name == "gate" {
			n = 2
		}
		for i := range n {
			p := startStage(t, natsURL, d.Name, fmt.Sprintf("%s-%d", d.Name, i))
			replicas[d.Name] = append(replicas[d.Name], p)
			all = append(all, p)
		}
	}
	for _, p := range all {
		bustest.Eventually(t, 60*time.Second, p.identity+" ready", p.ready(t))
	}
	managers, gates, ui := replicas["manager"], replicas["gate"], replicas["visualizer"][0]
	if code, body := ui.get("/ui/"); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("visualizer /ui/ = %d %.100s", code, body)
	}
	// The flow-control page gathers the gate's leader and both managers.
	gateLeader, _ := leaderOf(t, "gate", gates...)
	waitFlowControl(t, ui.url, "gate/"+gateLeader.identity, "manager/manager-0", "manager/manager-1")

	// Submitted to the standby manager: the leader's job checks must leave
	// a job being created elsewhere alone, and see it through.
	_, mgr := leaderOf(t, "manager", managers...)
	items := make([]string, 40)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	jobID := submit(t, mgr.url, map[string]any{
		"name": "failover", "mode": "batch", "deadline": "10m", "item_timeout": "5s",
		"workload": map[string]any{"items": items},
		"worker":   map[string]any{"exec": "sleep 0.25; cat"},
		"replicas": map[string]any{"min": 1, "max": 1, "initial": 1}, // decisions never change: only a restore restarts workers
	})
	job := func() jobView {
		var v jobView
		getJSON(t, mgr.url+"/submissions/"+jobID, &v)
		return v
	}
	bustest.Eventually(t, 60*time.Second, "the first results", func() bool { return job().Done > 0 })

	leader, standby := leaderOf(t, "gate", gates...)
	killed := time.Now()
	if err := leader.cmd.Process.Kill(); err != nil { // its workers die with it
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the standby gate to lead", func() bool { return standby.leading("gate") })
	t.Logf("the standby gate led %s after the leader's SIGKILL (lease TTL 2s)", time.Since(killed).Round(10*time.Millisecond))
	waitFlowControl(t, ui.url, "gate/"+standby.identity, "manager/manager-0", "manager/manager-1")
	var v jobView
	bustest.Eventually(t, 3*time.Minute, "the job to end", func() bool { v = job(); return final(v.Status) })
	if v.Status != "completed" || v.Done != len(items) {
		t.Fatalf("job %s with %d of %d done, want completed with all", v.Status, v.Done, len(items))
	}
	if b, _ := os.ReadFile(standby.logFile); !strings.Contains(string(b), "local workers restored") {
		t.Error("the new gate leader did not restore the job's local workers")
	}
	for _, p := range all {
		if p != leader {
			p.stop(t)
		}
	}
}

// TestEveryStageIsRegistered: each package under stages/ is a stage of the
// registry, so that pace up and pace stage run it and the test above
// starts it; and the registry names no stage that is not one.
func TestEveryStageIsRegistered(t *testing.T) {
	dirs, err := os.ReadDir("../../stages")
	if err != nil {
		t.Fatal(err)
	}
	var packages, registered []string
	for _, d := range dirs {
		if d.IsDir() {
			packages = append(packages, d.Name())
		}
	}
	for _, d := range host.Defs() {
		registered = append(registered, d.Name)
	}
	if !slices.Equal(packages, registered) {
		t.Errorf("stage packages %v, registered stages %v: want the same", packages, registered)
	}
}

// TestEveryTargetIsRegistered: every actuator a job spec may name has a
// registered target, each its own package under stages/gate/targets, and no
// target is registered that a spec cannot name.
func TestEveryTargetIsRegistered(t *testing.T) {
	var registered []string
	for _, d := range targets.Defs() {
		registered = append(registered, d.Name)
		if _, err := os.Stat(filepath.Join("../../stages/gate/targets", d.Name, "register.go")); err != nil {
			t.Errorf("target %q: %v", d.Name, err)
		}
	}
	if want := []string{schemas.KubernetesActuator, schemas.LocalActuator}; !slices.Equal(registered, want) {
		t.Errorf("registered targets %v, want the actuators a spec may name, %v", registered, want)
	}
}

// TestStageServesHTTPS checks --tls-cert/--tls-key with a test CA's
// certificate, and that half of the pair is a usage error.
func TestStageServesHTTPS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := serverCert(t)
	natsURL := bustest.ServerAt(t, t.TempDir(), "127.0.0.1:0").ClientURL()
	p := startStage(t, natsURL, "processor", "processor-tls", "--tls-cert", certFile, "--tls-key", keyFile)
	p.url = strings.Replace(p.url, "http://", "https://", 1)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	bustest.Eventually(t, 60*time.Second, "readyz over HTTPS", func() bool {
		resp, err := hc.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK && resp.TLS != nil
	})
	if resp, err := http.Get(strings.Replace(p.url, "https://", "http://", 1) + "/readyz"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered on the HTTPS port")
		}
	}
	p.stop(t)

	cmd := exec.Command(paceBin, "stage", "processor", "--nats", natsURL, "--tls-cert", certFile)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), "--tls-key") {
		t.Errorf("--tls-cert alone: exit %d, %s; want %d naming --tls-key", code, out, exitUsage)
	}
}

func TestStageUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stage"}, "needs a stage"},
		{[]string{"stage", "bogus"}, `unknown stage "bogus"`},
		{[]string{"stage", "collector", "--sample-interval", "1ms"}, "--sample-interval"},
		{[]string{"stage", "gate", "--actuator", "none"}, "--kubernetes"},
		{[]string{"stage", "processor", "--lease-ttl", "10ms"}, "--lease-ttl"},
		{[]string{"stage", "manager", "--nats-callout-key", "seed.nk"}, "--nats-callout-key needs --token-file"},
		{[]string{"stage", "manager", "--local-exec", "root"}, `--local-exec "root"`},
		{[]string{"stage", "controller", "--keda-listen", "0.0.0.0:6000"}, "--keda-client-ca"},
		{[]string{"stage", "controller", "--keda-listen", "127.0.0.1:6000", "--keda-tls-cert", "c.pem"}, "go together"},
		{[]string{"stage", "controller", "--otlp-protocol", "thrift"}, `OTLP protocol "thrift"`},
		{[]string{"stage", "controller", "--trace-items", "2"}, "must be in [0, 1]"},
		// A bad target flag is refused where it leaves the gate out.
		{[]string{"up", "--actuator", "bogus"}, `--actuator "bogus": want local or none`},
		{[]string{"stage", "gate", "--actuator", "bogus"}, `--actuator "bogus": want local or none`},
	} {
		args := c.args
		if args[0] == "stage" && len(args) > 2 { // a stage: nothing may connect before its flags are checked
			args = append(args, "--nats", "nats://127.0.0.1:1", "--connect-timeout", "1s")
		}
		cmd := exec.Command(paceBin, args...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), c.want) {
			t.Errorf("pace %s: exit %d, %s; want %d naming %s", strings.Join(c.args, " "), code, out, exitUsage, c.want)
		}
	}
}

// TestUpServesHTTPS checks pace up's --tls-cert/--tls-key, and that its API
// identifies callers by client certificate (--client-ca-file): /metrics,
// which only members of pace:metrics and the admins may read, is refused to
// a caller without a certificate and to one of another group, and served to
// a certificate of group pace:metrics.
func TestUpServesHTTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := serverCert(t)
	clients := bustest.NewCA(t, "clients")
	cmd := exec.Command(paceBin, "up", "--data", filepath.Join(dir, "data"), "--http", freeAddr(t), "--nats-listen", "",
		"--actuator", "none", "--tls-cert", certFile, "--tls-key", keyFile, "--client-ca-file", clients.File, "--log-format", "json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	var url string
	lines := bufio.NewScanner(stdout)
	for url == "" && lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "HTTP: "); ok {
			url = u
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("pace up printed HTTP URL %q, want https://", url)
	}
	get := func(path string, certs ...tls.Certificate) int {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}}}
		resp, err := hc.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz over HTTPS = %d", code)
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		want  int
	}{
		{"no certificate", nil, http.StatusUnauthorized},
		{"another group", []tls.Certificate{clients.Client("carol", "dev")}, http.StatusForbidden},
		{"pace:metrics", []tls.Certificate{clients.Client("prometheus", auth.MetricsReaders)}, http.StatusOK},
	} {
		if code := get("/metrics", tc.certs...); code != tc.want {
			t.Errorf("GET /metrics, %s: %d, want %d", tc.name, code, tc.want)
		}
	}
}

// serverCert returns the files of a certificate for 127.0.0.1 and its key,
// and a pool trusting it (bustest.TLS).
func serverCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	f := bustest.TLS(t)
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s: no certificate", f.CA)
	}
	return f.Cert, f.Key, pool
}

func TestStageWorkerEnvCarriesNATSAuth(t *testing.T) {
	t.Parallel()
	o := stageOptions{nats: natsFlags{user: "worker", password: "s3cret", nkey: "/seed.nk", creds: "", tlsCA: "/ca.pem",
		prefix: "pace"}}
	env := o.workerEnv(&app{logLevel: "info"})
	for _, want := range []string{"PACE_NATS_USER=worker", "PACE_NATS_PASSWORD=s3cret", "PACE_NATS_NKEY=/seed.nk", "PACE_NATS_CA=/ca.pem"} {
		if !slices.Contains(env, want) {
			t.Errorf("worker env %q lacks %s", env, want)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "PACE_NATS_CREDS=") {
			t.Errorf("unset credentials passed on: %s", kv)
		}
	}

	// With job tokens, a worker gets its job's token (jobEnv), never the
	// stage's own credentials: only the CA that verifies the server.
	o.f.tokens.jobTokenKey = "/job-token.key"
	env = o.workerEnv(&app{logLevel: "info"})
	if !slices.Contains(env, "PACE_NATS_CA=/ca.pem") {
		t.Errorf("worker env %q lacks the CA", env)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "PACE_NATS_USER=") || strings.HasPrefix(kv, "PACE_NATS_PASSWORD=") || strings.HasPrefix(kv, "PACE_NATS_NKEY=") {
			t.Errorf("the stage's credentials passed on with job tokens: %s", kv)
		}
	}
}

// runStage runs `pace stage name` as identity inside the test process
// against natsURL until the test ends, then stops it and requires a clean
// exit; it returns its HTTP base URL.
func runStage(t *testing.T, natsURL, name, identity string, extra ...string) string {
	t.Helper()
	addr := freeAddr(t)
	out, err := os.Create(filepath.Join(t.TempDir(), identity+".log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"stage", name, "--nats", natsURL, "--http", addr, "--identity", identity, "--log-format", "json"}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, strings.NewReader(""), out, out) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			b, _ := os.ReadFile(out.Name())
			t.Errorf("pace stage %s as %s: exit %d\n%s", name, identity, code, b)
		}
		_ = out.Close()
	})
	return "http://" + addr
}

// flowControlView reads the first flow-control event of the UI at url as
// token's user.
func flowControlView(t *testing.T, url, token string) *visualizer.FlowControlView {
	t.Helper()
	code, data := firstEvent(t, url+"/ui/events/flowcontrol", token)
	if code != http.StatusOK {
		t.Fatalf("flow-control stream as %s: %d", token, code)
	}
	var v visualizer.FlowControlView
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("flow-control event %s: %v", data, err)
	}
	return &v
}

// waitFlowControl waits until the flow-control page of the UI at url (no
// --token-file) shows exactly the processes want, as stage/identity.
func waitFlowControl(t *testing.T, url string, want ...string) {
	t.Helper()
	var got []string
	bustest.Eventually(t, 30*time.Second, fmt.Sprintf("flow control of %v", want), func() bool {
		got = got[:0]
		for _, p := range flowControlView(t, url, "").Processes {
			got = append(got, p.Stage+"/"+p.Replica)
		}
		return slices.Equal(got, want)
	})
}

// TestStageVisualizerGathersFlowControl runs the gate, manager and
// visualizer stages in this process over a real NATS server: the
// visualizer's flow-control page first says that neither answers, then
// shows the gate's leader and the manager, each labelled with its identity.
func TestStageVisualizerGathersFlowControl(t *testing.T) {
	t.Parallel()
	natsURL := bustest.ServerAt(t, t.TempDir(), "127.0.0.1:0").ClientURL()
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1\nroot-token,root,0,\"pace:admins\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ui := runStage(t, natsURL, "visualizer", "visualizer-0", "--token-file", tokens)
	bustest.Eventually(t, 60*time.Second, "the visualizer ready", func() bool {
		resp, err := http.Get(ui + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if code, body, _ := httpGet(t, ui+"/ui/flowcontrol", ""); code != http.StatusOK || !strings.Contains(body, `id="fc-page"`) {
		t.Errorf("GET /ui/flowcontrol = %d %.100s", code, body)
	}
	if code, _ := firstEvent(t, ui+"/ui/events/flowcontrol", "alice-token"); code != http.StatusForbidden {
		t.Errorf("flow control for alice: %d, want 403", code)
	}
	if v := flowControlView(t, ui, "root-token"); len(v.Processes) != 0 || !slices.Equal(v.Missing, []string{"gate", "manager"}) {
		t.Errorf("before the gate and manager run: %+v, want both missing", v)
	}

	runStage(t, natsURL, "gate", "gate-0", "--actuator", "local")
	runStage(t, natsURL, "manager", "manager-0")
	var v *visualizer.FlowControlView
	bustest.Eventually(t, 60*time.Second, "the gate and the manager on the page", func() bool {
		v = flowControlView(t, ui, "root-token")
		return len(v.Processes) == 2
	})
	for i, want := range [][2]string{{"gate", "gate-0"}, {"manager", "manager-0"}} {
		p := v.Processes[i]
		if p.Stage != want[0] || p.Replica != want[1] || !slices.ContainsFunc(p.Levels, func(l visualizer.Level) bool { return l.Name == "exempt" }) {
			t.Errorf("process %d = %s %s with levels %+v, want %s %s with APF's levels", i, p.Stage, p.Replica, p.Levels, want[0], want[1])
		}
	}
	if len(v.Missing) != 0 {
		t.Errorf("missing %v with both answering", v.Missing)
	}
}
