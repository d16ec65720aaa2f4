package main

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
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/leaktest"
	"github.com/pace-platform/pace/internal/localtest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets/local"
)

// paceBin is the pace binary built once for the end-to-end tests.
var paceBin string

func TestMain(m *testing.M) {
	local.RunSandboxInit() // pace stage gate runs in this process: its sandboxed workers start with this binary
	var err error
	if paceBin, err = localtest.Program("pace", ".", "."); err != nil { // on the PATH of sandboxed workers too
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leaktest.Main(m) // pace up in process, too, must leave no goroutine behind
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// paceUp is a running `pace up` process.
type paceUp struct {
	cmd      *exec.Cmd
	natsURL  string
	httpURL  string
	dataDir  string
	stderr   *lockedBuffer
	waitDone chan error
	env      []string // of the bus commands run against it, e.g. PACE_TOKEN
}

func startUp(t testing.TB, dataDir string, extra ...string) *paceUp {
	t.Helper()
	args := append([]string{"up", "--data", dataDir, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-format", "json"}, extra...)
	cmd := exec.Command(paceBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // even a test killed by its timeout leaves no server
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	u := &paceUp{cmd: cmd, dataDir: dataDir, stderr: &lockedBuffer{}, waitDone: make(chan error, 1)}
	cmd.Stderr = u.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-u.waitDone
		if t.Failed() { // the end of pace up's log tells why
			log := u.stderr.String()
			t.Logf("pace up log tail:\n%s", log[max(0, len(log)-6000):])
		}
	})
	lines := bufio.NewScanner(stdout)
	for (u.natsURL == "" || u.httpURL == "") && lines.Scan() {
		line := lines.Text()
		if i := strings.Index(line, "nats://"); i >= 0 {
			u.natsURL = line[i:]
		}
		if i := strings.Index(line, "http://"); i >= 0 {
			u.httpURL = line[i:]
		}
	}
	go func() { u.waitDone <- cmd.Wait() }()
	if u.natsURL == "" || u.httpURL == "" {
		t.Fatalf("pace up printed no URLs; stderr:\n%s", u.stderr)
	}
	resp, err := http.Get(u.httpURL + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	return u
}

// stop sends SIGTERM and requires a clean exit.
func (u *paceUp) stop(t *testing.T) {
	t.Helper()
	if err := u.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-u.waitDone:
		u.waitDone <- err // for the cleanup, also when this fails
		if err != nil {
			t.Fatalf("pace up exit after SIGTERM: %v; stderr:\n%s", err, u.stderr)
		}
	case <-time.After(2 * time.Minute): // a stop ends the wait at once; a slow machine must not fail it
		t.Fatal("pace up did not stop within 2 minutes of SIGTERM")
	}
}

// pace runs the binary with args against u and returns its stdout.
func (u *paceUp) pace(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(paceBin, args...)
	cmd.Env = append(append(os.Environ(), "PACE_NATS_URL="+u.natsURL), u.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pace %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func (u *paceUp) client(t *testing.T) *bus.Client {
	t.Helper()
	c, err := bus.Connect(context.Background(), u.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(c) })
	return c
}

type jsonResult struct {
	ItemID string `json:"item_id"`
	Result string `json:"result"`
}

func parseResults(t *testing.T, out string) []jsonResult {
	t.Helper()
	var rs []jsonResult
	for line := range strings.Lines(out) {
		var r jsonResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("results line %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestWorkerExecEndToEnd(t *testing.T) {
	t.Parallel()
	u := startUp(t, t.TempDir())
	var in strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&in, "%d\n", i)
	}
	in.WriteString(" \t\n51") // a blank line is skipped, the last line kept without a newline
	if out := u.pace(t, in.String(), "push", "squares"); !strings.Contains(out, "pushed 51 items") {
		t.Fatalf("push said %q", out)
	}

	worker := startWorker(t, u, "squares", `read n; echo $((n*n))`, "-c", "3")
	results := parseResults(t, u.pace(t, "", "results", "squares", "-o", "json"))
	stopWorker(t, worker)
	var got []int
	ids := map[string]bool{}
	for _, r := range results {
		n, err := strconv.Atoi(r.Result)
		if err != nil {
			t.Fatalf("result %q is not a number", r.Result)
		}
		got = append(got, n)
		ids[r.ItemID] = true
	}
	sort.Ints(got)
	for i, n := range got {
		if want := (i + 1) * (i + 1); n != want {
			t.Fatalf("sorted results[%d] = %d, want %d (all: %v)", i, n, want, got)
		}
	}
	if len(got) != 51 || len(ids) != 51 {
		t.Fatalf("%d results for %d distinct items, want 51", len(got), len(ids))
	}
	text := u.pace(t, "", "results", "squares")
	if lines := strings.Count(text, "\n"); lines != 51 {
		t.Errorf("text output has %d lines, want 51", lines)
	}
	u.stop(t)
}

func TestFailingCommandIsDeadLettered(t *testing.T) {
	t.Parallel()
	u := startUp(t, t.TempDir())
	c := u.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds the wait for the letter
	defer cancel()
	if _, err := c.DeclareJob(ctx, "fails", schemas.JobSpec{Mode: schemas.Streaming, MaxDeliveries: 2}); err != nil {
		t.Fatal(err)
	}
	u.pace(t, "x\n", "push", "fails")
	startWorker(t, u, "fails", `echo "no such file" >&2; exit 3`, "--retry-delay", "50ms")

	st, err := c.JetStream().Stream(ctx, "PACE_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	for raw == nil && ctx.Err() == nil {
		if m, err := st.GetLastMsgForSubject(ctx, "pace.dead.fails"); err == nil {
			raw = m.Data
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	var d schemas.DeadLetter
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dead letter %s: %v", raw, err)
	}
	if d.Reason != schemas.MaxDeliveries || d.Deliveries != 2 || d.Payload != "x" ||
		!strings.Contains(d.LastError, "exit status 3") || !strings.Contains(d.LastError, "no such file") {
		t.Errorf("dead letter = %+v, want 2 deliveries with the exit status and stderr", d)
	}
	if out := u.pace(t, "", "results", "fails"); out != "" {
		t.Errorf("results of a job whose only item died = %q, want none", out)
	}
}

func TestUpRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	u := startUp(t, dir)
	u.pace(t, "a\nb\nc\n", "push", "kept")
	u.stop(t)

	u = startUp(t, dir)
	w := startWorker(t, u, "kept", "tr a-z A-Z")
	out := u.pace(t, "", "results", "kept")
	stopWorker(t, w)
	got := strings.Fields(out)
	sort.Strings(got)
	if strings.Join(got, " ") != "A B C" {
		t.Errorf("results after restart = %q, want A B C", out)
	}
	u.stop(t)
}

// startWorker runs `pace worker JOB --exec command` against u.
func startWorker(t *testing.T, u *paceUp, job, command string, args ...string) *exec.Cmd {
	t.Helper()
	w := exec.Command(paceBin, append([]string{"worker", job, "--exec", command, "--nats", u.natsURL}, args...)...)
	w.Env = append(os.Environ(), u.env...)
	w.Stderr = &bytes.Buffer{}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
	return w
}

// stopWorker sends SIGTERM and requires exit status 0.
func stopWorker(t *testing.T, w *exec.Cmd) {
	t.Helper()
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Errorf("worker exit after SIGTERM: %v, want 0\n%s", err, w.Stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{"unknown flag", []string{"push", "j", "--nope"}, nil, exitUsage, "unknown flag: --nope"},
		{"missing job", []string{"push"}, nil, exitUsage, "takes 1 argument"},
		{"bad job", []string{"push", "a.b"}, nil, exitUsage, `job "a.b"`},
		{"worker without exec", []string{"worker", "j"}, nil, exitUsage, "--exec is required"},
		{"bad concurrency", []string{"worker", "j", "--exec", "cat", "-c", "0"}, nil, exitUsage, "--concurrency 0"},
		{"bad exec mode", []string{"worker", "j", "--exec", "cat", "--exec-mode", "batch"}, nil, exitUsage,
			`invalid argument "batch" for "--exec-mode" flag: want item, lines or json`},
		{"bad output", []string{"results", "j", "-o", "yaml"}, nil, exitUsage, `invalid argument "yaml" for "-o, --output" flag: want text or json`},
		{"bad env", []string{"worker", "j", "--exec", "cat"}, map[string]string{"PACE_CONCURRENCY": "many"}, exitUsage, "PACE_CONCURRENCY"},
		{"bad size", []string{"up", "--max-store", "lots"}, nil, exitUsage, "--max-store"},
		{"bad http", []string{"up", "--http", "8080"}, nil, exitUsage, "--http"},
		{"unknown command", []string{"frobnicate"}, nil, exitUsage, "unknown command"},
		{"missing file", []string{"push", "j", "--file", "/does/not/exist"}, nil, exitRejected, "--file"},
		{"missing argument named", []string{"worker"}, nil, exitUsage, "missing JOB (usage: pace worker JOB"},
		{"bad api url", []string{"jobs", "--api", "localhost:8080"}, nil, exitUsage, `--api "localhost:8080"`},
		{"bad nats scheme", []string{"push", "j", "--nats", "http://127.0.0.1:4222"}, nil, exitUsage, `--nats "http://127.0.0.1:4222"`},
		{"bad nats port", []string{"up", "--nats-listen", "127.0.0.1:99999"}, nil, exitUsage, "--nats-listen"},
		{"open bus beyond loopback", []string{"up", "--nats-listen", "0.0.0.0:0"}, nil, exitUsage, "give --token-file"},
		{"token and password", []string{"push", "j", "--token", "t", "--nats-user", "u"}, nil, exitUsage, "exclude each other"},
		{"bad local exec", []string{"up", "--local-exec", "some"}, nil, exitUsage, "--local-exec \"some\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if !strings.Contains(first, tt.msg) {
				t.Errorf("first stderr line = %q, want it to contain %q", first, tt.msg)
			}
			if hint := "Run 'pace " + tt.args[0] + " --help'"; code == exitUsage && tt.name != "unknown command" &&
				!strings.Contains(stderr.String(), hint) {
				t.Errorf("stderr %q lacks %q", stderr.String(), hint)
			}
		})
	}
}

func TestEnvFillsFlagsAndFlagsWin(t *testing.T) {
	t.Setenv("PACE_OUTPUT", "yaml")
	var stdout, stderr bytes.Buffer
	// pace results has no yaml: the error names the variable that set it.
	if code := run(context.Background(), []string{"results", "j"}, nil, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), `PACE_OUTPUT="yaml": want text or json`) {
		t.Errorf("env not applied: code %d, %s", code, stderr.String())
	}
	// The flag beats the environment: with -o json the env value is ignored and
	// the command gets as far as connecting (to a closed port).
	stderr.Reset()
	code := run(context.Background(), []string{"results", "j", "-o", "json", "--nats", "nats://" + freeAddr(t),
		"--connect-timeout", "200ms", "--log-format", "text"}, nil, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "connect to nats") {
		t.Errorf("code %d, stderr %s; want a connection failure", code, stderr.String())
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"version"}, nil, &stdout, &bytes.Buffer{}); code != 0 ||
		!strings.HasPrefix(stdout.String(), "pace ") {
		t.Errorf("version: code %d, output %q", code, stdout.String())
	}
}

func TestUpDemoMeetsItsDeadline(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(paceBin, "up", "--demo", "--http", freeAddr(t), "--nats-listen", freeAddr(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pace up --demo: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	for _, want := range []string{"nats://", "http://", "Report for demo-", "deadline met", "120 ok, 0 dead", "replica-seconds:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	most := 0
	for _, m := range regexp.MustCompile(`(\d+) replicas`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[1])
		most = max(most, n)
	}
	if most < 2 {
		t.Errorf("the demo never scaled out (at most %d replicas):\n%s", most, out)
	}
}

func TestReportValue(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`null`:                          "-",
		`"deadline"`:                    "deadline",
		`-0`:                            "0",
		`0.25`:                          "0.25",
		`true`:                          "true",
		`[-0.5,"2026-11-30T03:37:01Z"]`: "-0.5 at 2026-11-30T03:37:01Z",
		`[]`:                            "[]",
		`{"proportional_gain":0.1}`:     `{"proportional_gain":0.1}`,
	} {
		if got := reportValue(json.RawMessage(raw)); got != want {
			t.Errorf("reportValue(%s) = %q, want %q", raw, got, want)
		}
	}
}
