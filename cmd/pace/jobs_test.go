package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/bus/rediswq/rediswqtest"
	"github.com/pace-platform/pace/internal/localtest"
	"github.com/pace-platform/pace/schemas"
)

// jobCLI runs pace job commands against a pace up with a token file.
type jobCLI struct {
	u      *paceUp
	tokens string
}

func startJobAPI(t *testing.T, extra ...string) *jobCLI {
	t.Helper()
	return startJobAPIAt(t, t.TempDir(), extra...)
}

// startJobAPIAt starts pace up with its data and token file in dir.
func startJobAPIAt(t *testing.T, dir string, extra ...string) *jobCLI {
	t.Helper()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1\nbob-token,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, filepath.Join(dir, "data"), append([]string{"--token-file", tokens}, extra...)...)
	u.env = []string{"PACE_TOKEN=alice-token"} // the bus authenticates too
	return &jobCLI{u: u, tokens: tokens}
}

// status returns a job's view as alice.
func (j *jobCLI) status(t *testing.T, id string) map[string]any {
	t.Helper()
	out, errOut, code := j.run(t, "status", id, "-o", "json")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("status %s = %d %s %s", id, code, out, errOut)
	}
	return v
}

// submitDoc submits a JSON document as alice and returns the job id.
func (j *jobCLI) submitDoc(t *testing.T, doc string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := j.run(t, "submit", file)
	if code != 0 {
		t.Fatalf("submit = %d %s", code, errOut)
	}
	return strings.TrimSpace(out)
}

func TestJobsSurvivePaceUpRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := startJobAPIAt(t, dir)
	batch := j.submitDoc(t, `{"name":"later","deadline":"1h","workload":{"items":["a","b","c"],"item_time":"2s"}}`)
	stream := j.submitDoc(t, `{"name":"feed","mode":"streaming"}`)
	j.u.pace(t, "x\ny\nz\n", "push", stream) // a streaming job fed by pace push
	w := startWorker(t, j.u, stream, "tr a-z A-Z")
	bustest.Eventually(t, 20*time.Second, "3 results of the streaming job", func() bool {
		return j.status(t, stream)["done"] == 3.0
	})
	stopWorker(t, w)
	j.u.stop(t)

	j = startJobAPIAt(t, dir)
	out, _, _ := j.run(t, "jobs", "-o", "json")
	var list map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("jobs: %v %s", err, out)
	}
	if list[batch]["status"] != "ongoing" || list[stream]["status"] != "ongoing" || list[stream]["done"] != 3.0 {
		t.Fatalf("after restart: %v", list)
	}
	// Its admission's forecast is kept with it: 3 items of 2 s on one replica.
	if out, _, _ := j.run(t, "status", batch); !strings.Contains(out, "Predicted:") || !strings.Contains(out, "done in 7s") ||
		!strings.Contains(out, "meets its deadline") {
		t.Errorf("status after restart:\n%s", out)
	}
	startWorker(t, j.u, batch, "tr a-z A-Z") // the running job continues
	bustest.Eventually(t, 20*time.Second, "batch job completed after the restart", func() bool {
		return j.status(t, batch)["status"] == "completed"
	})
	if _, errOut, code := j.run(t, "stop", stream); code != 0 {
		t.Fatalf("stop = %d %s", code, errOut)
	}
	bustest.Eventually(t, 20*time.Second, "streaming job stopped", func() bool {
		return j.status(t, stream)["status"] == "stopped"
	})
	push := exec.Command(paceBin, "push", stream, "--nats", j.u.natsURL)
	push.Env = append(os.Environ(), j.u.env...)
	push.Stdin = strings.NewReader("late\n")
	var ee *exec.ExitError
	if out, err := push.CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != exitRejected {
		t.Errorf("push to a stopped job = %v %s, want exit %d", err, out, exitRejected)
	}
	j.u.stop(t)
}

// run runs pace with args as alice and returns stdout, stderr and the exit code.
func (j *jobCLI) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(paceBin, args...)
	cmd.Env = append(os.Environ(), "PACE_API="+j.u.httpURL, "PACE_TOKEN=alice-token")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestJobCommandsAgainstPaceUp(t *testing.T) {
	t.Parallel()
	j := startJobAPI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "items.txt"), []byte("a\nb\n\nc"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(spec, []byte("name: shout\nmode: batch\ndeadline: 10m\nworkload:\n  file: items.txt\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// submit prints the id alone; --wait follows the job until it completes.
	cmd := exec.Command(paceBin, "submit", spec, "--wait", "--poll-interval", "50ms")
	cmd.Env = append(os.Environ(), "PACE_API="+j.u.httpURL, "PACE_TOKEN=alice-token")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	id, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("submit printed no id: %v\n%s", err, stderr.String())
	}
	id = strings.TrimSpace(id)
	if !strings.HasPrefix(id, "shout-") {
		t.Fatalf("id = %q, want shout-…", id)
	}
	startWorker(t, j.u, id, "tr a-z A-Z")
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, stderr.String())
	}
	if len(rest) != 0 {
		t.Errorf("submit printed more than the id: %q", rest)
	}
	if !strings.Contains(stderr.String(), "3/3 items") || !strings.Contains(stderr.String(), "completed") {
		t.Errorf("progress output lacks 3/3 items … completed:\n%s", stderr.String())
	}

	if got, errOut, code := j.run(t, "status", id); code != 0 || !strings.Contains(got, "completed") || !strings.Contains(got, "3 done, 0 dead") {
		t.Errorf("status = %d %q %s", code, got, errOut)
	}
	got, _, code := j.run(t, "jobs", "-o", "json")
	var list map[string]map[string]any
	if code != 0 || json.Unmarshal([]byte(got), &list) != nil || list[id]["status"] != "completed" {
		t.Errorf("jobs -o json = %d %s", code, got)
	}
	if got, _, code := j.run(t, "jobs"); code != 0 || !strings.HasPrefix(got, "ID") || !strings.Contains(got, id) {
		t.Errorf("jobs = %d %q", code, got)
	}
	got, _, code = j.run(t, "report", id, "-o", "json")
	var summary map[string]any
	if code != 0 || json.Unmarshal([]byte(got), &summary) != nil || summary["items_ok"] != 3.0 || summary["final_error"] == nil {
		t.Errorf("report = %d %s", code, got)
	}
	if got, _, code := j.run(t, "logs", id); code != 0 || !strings.Contains(got, "manager created") || !strings.Contains(got, "manager completed") {
		t.Errorf("logs = %d %q", code, got)
	}
	if got, _, code := j.run(t, "logs", id, "-f"); code != 0 || !strings.Contains(got, "manager completed") {
		t.Errorf("logs -f of a finished job = %d %q", code, got)
	}
	if _, errOut, code := j.run(t, "stop", id); code != exitRejected || !strings.Contains(errOut, "already completed") {
		t.Errorf("stop of a completed job = %d %s, want %d", code, errOut, exitRejected)
	}
	if got, errOut, code := j.run(t, "delete", id); code != 0 || !strings.Contains(got, "deleted") {
		t.Errorf("delete = %d %q %s", code, got, errOut)
	}

	// Refused input: exit 3 and every invalid field named.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"mode":"batch","replicas":{"min":-1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, errOut, code := j.run(t, "submit", bad)
	if code != exitRejected || got != "" || !strings.Contains(errOut, "spec.deadline") || !strings.Contains(errOut, "spec.replicas.min") {
		t.Errorf("bad submit = %d %q %s", code, got, errOut)
	}
	// A deadline no worker count can meet, with deadline_policy reject: a
	// refusal too (422), exit 3.
	infeasible := filepath.Join(dir, "infeasible.json")
	if err := os.WriteFile(infeasible, []byte(`{"deadline":"10s","deadline_policy":"reject","replicas":{"max":1},
		"worker":{"exec":"cat"},"workload":{"items":["a","b","c"],"item_time":"1m"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, errOut, code := j.run(t, "submit", infeasible); code != exitRejected || got != "" || !strings.Contains(errOut, "422") {
		t.Errorf("infeasible submit = %d %q %s, want exit %d with the 422", code, got, errOut, exitRejected)
	}
	// A job another user cannot see.
	id2, _, _ := j.run(t, "submit", spec)
	cmd = exec.Command(paceBin, "status", strings.TrimSpace(id2), "--api", j.u.httpURL, "--token", "bob-token")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not found") {
		t.Errorf("bob's status of alice's job: %v %s", err, out)
	}
	if _, _, code := j.run(t, "terminate", strings.TrimSpace(id2)); code != 0 {
		t.Errorf("terminate = %d", code)
	}
	j.u.stop(t)
}

func TestJobAPIThrottledByAPF(t *testing.T) {
	t.Parallel()
	j := startJobAPI(t, "--flowcontrol-config", "testdata/tiny-submissions.yaml",
		"--max-requests-inflight", "10", "--max-mutating-requests-inflight", "5") // tiny gets ceil(15·1/Σshares) = 1 seat
	// A submission whose workload download hangs holds the level's only seat ...
	requested, release := make(chan struct{}), make(chan struct{})
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(requested)
		<-release
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "a\nb\n")
	}))
	defer files.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	spec := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(spec, []byte(`{"deadline":"1m","workload":{"url":"`+files.URL+`/w.txt"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out, errOut string
		code        int
	}
	slow := make(chan result, 1)
	go func() {
		out, errOut, code := j.run(t, "submit", spec)
		slow <- result{out, errOut, code}
	}()
	<-requested
	// ... so another request of the level is rejected with the 429 envelope,
	status, body, hdr := httpGet(t, j.u.httpURL+"/submissions", "alice-token")
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(body, `"error_code":429`) {
		t.Errorf("GET while the seat is held = %d %s %v, want 429 with Retry-After", status, body, hdr)
	}
	// probes are exempt,
	if status, _, _ := httpGet(t, j.u.httpURL+"/readyz", ""); status != http.StatusOK {
		t.Errorf("readyz = %d, want 200", status)
	}
	// and once the seat is free the API answers again.
	unblock()
	if r := <-slow; r.code != 0 || !strings.HasPrefix(r.out, "job-") {
		t.Fatalf("slow submit = %d %q %s", r.code, r.out, r.errOut)
	}
	if status, body, _ := httpGet(t, j.u.httpURL+"/submissions", "alice-token"); status != http.StatusOK {
		t.Errorf("GET after the seat is free = %d %s", status, body)
	}
	j.u.stop(t)
}

// TestAsperathosPayloadRunsLocally runs Asperathos' payload 2 on pace up
// alone: the local actuator starts the payload's cmd (wrapper.sh runs
// 'pace worker'), the controller scales it, the job completes.
func TestAsperathosPayloadRunsLocally(t *testing.T) {
	t.Setenv("PATH", filepath.Dir(paceBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	examples := installedExamples(t)
	files := httptest.NewServer(http.FileServer(http.Dir(examples)))
	defer files.Close()
	doc, err := os.ReadFile(filepath.Join(examples, "payload2-local.json"))
	if err != nil {
		t.Fatal(err)
	}
	payload := strings.ReplaceAll(string(doc), "http://127.0.0.1:8000", files.URL)
	payload = strings.ReplaceAll(payload, `"wrapper.sh"`, `"`+filepath.Join(examples, "wrapper.sh")+`"`)
	j := startJobAPI(t)
	id := j.submitDoc(t, payload)
	if !strings.HasPrefix(id, "kj-") {
		t.Fatalf("id = %q", id)
	}
	bustest.Eventually(t, 90*time.Second, "payload 2 completed", func() bool {
		v := j.status(t, id)
		if final(v["status"].(string)) && v["status"] != "completed" {
			t.Fatalf("job ended %v: %v", v["status"], v["reason"])
		}
		return v["status"] == "completed"
	})
	v := j.status(t, id)
	if v["done"] != 50.0 || v["app_id"] != id || v["starting_time"] == "Job is not running yet!" {
		t.Errorf("view = %v", v)
	}
	j.u.stop(t)
}

// TestAsperathosRedisWorkerRunsOnPaceUp: a worker written for Asperathos,
// which reads its queue from Redis (examples/asperathos/rediswq-worker),
// runs unchanged as the cmd of an Asperathos payload on a secured pace up:
// the local actuator points it at the Redis front with its job's token as
// the queue's name, every item gets one result, and the error it pushes for
// a bad item is that item's dead letter on /errors.
func TestAsperathosRedisWorkerRunsOnPaceUp(t *testing.T) {
	t.Parallel()
	python := rediswqtest.Python(t)
	worker := filepath.Join(installedExamples(t), "rediswq-worker", "worker.py")
	var workload strings.Builder
	for i := range 20 {
		fmt.Fprintf(&workload, "item-%02d\n", i)
	}
	workload.WriteString("bad-1\n")
	payload := kubejobs(t, []string{python, worker}, serveText(t, "", workload.String()), 2, func(info map[string]any) {
		info["env_vars"] = map[string]any{"ITEM_LEASE_SECS": "5"}
	})
	j := startJobAPI(t)
	id := j.submitDoc(t, payload)
	bustest.Eventually(t, 90*time.Second, "the job to finish", func() bool {
		return final(j.status(t, id)["status"].(string))
	})
	v := j.status(t, id)
	if v["status"] != "failed" || v["done"] != 20.0 || v["dead"] != 1.0 {
		t.Fatalf("view = %v, want failed with 20 done and bad-1 dead", v)
	}
	if v["redis_ip"] != "127.0.0.1" || v["redis_port"].(float64) <= 0 {
		t.Errorf("view's redis_ip, redis_port = %v, %v", v["redis_ip"], v["redis_port"])
	}
	if out := j.u.pace(t, "", "results", id); len(strings.Fields(out)) != 20 || !strings.Contains(out, "ITEM-07") {
		t.Fatalf("results = %s", out)
	}
	req, _ := http.NewRequest("GET", j.u.httpURL+"/submissions/"+id+"/errors", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dead []schemas.DeadLetter
	if err := json.NewDecoder(resp.Body).Decode(&dead); err != nil || len(dead) != 1 ||
		dead[0].Payload != "bad-1" || dead[0].LastError != "cannot process bad-1" {
		t.Fatalf("errors = %+v, %v", dead, err)
	}
	j.u.stop(t)
}

// TestGoRedisWorkerRunsOnPaceUp: a worker on go-redis, following the
// published rediswq library's commands (examples/asperathos/goredis-worker)
// with two goroutines sharing its connection pool and every item given
// back once, runs as the cmd of an Asperathos payload on a secured pace up:
// every item gets one result, its connections are counted as the job's
// replicas in the progress samples, and the front creates no job.
func TestGoRedisWorkerRunsOnPaceUp(t *testing.T) {
	t.Parallel()
	worker := rediswqtest.GoWorker(t)
	var workload strings.Builder
	for i := range 24 {
		fmt.Fprintf(&workload, "item-%02d\n", i)
	}
	// One replica: a give-back is a redelivery, which before_first_result
	// counts, so each connection's first give-back comes before the first
	// result; two stay under the rule's 3, four (two replicas) did not
	// when the machine was busy.
	payload := kubejobs(t, []string{worker}, serveText(t, "", workload.String()), 1, func(info map[string]any) {
		info["env_vars"] = map[string]any{"GIVE_BACK": "1", "CONCURRENCY": "2", "WORK_SECONDS": "0.5"}
	})
	j := startJobAPI(t)
	id := j.submitDoc(t, payload)
	bustest.Eventually(t, 2*time.Minute, "the job to finish", func() bool {
		return final(j.status(t, id)["status"].(string))
	})
	if v := j.status(t, id); v["status"] != "completed" || v["done"] != 24.0 {
		t.Fatalf("view = %v, want completed with 24 done", v)
	}
	out := j.u.pace(t, "", "results", id)
	if got := strings.Fields(out); len(got) != 24 || !strings.Contains(out, "ITEM-23") {
		t.Fatalf("results = %s", out)
	}
	var report map[string]map[string]any
	rep, errOut, code := j.run(t, "report", id, "--detailed", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(rep), &report) != nil {
		t.Fatalf("report = %d %s %s", code, rep, errOut)
	}
	counted := false
	for _, s := range report {
		counted = counted || s["replicas"].(float64) >= 1
	}
	if !counted {
		t.Errorf("no sample of the detailed report counts the Redis workers: %v", report)
	}
	list, _, _ := j.run(t, "jobs", "-o", "json")
	var jobs map[string]any
	if err := json.Unmarshal([]byte(list), &jobs); err != nil || len(jobs) != 1 {
		t.Errorf("jobs = %s (%v), want only %s: the front created jobs", list, err, id)
	}
	j.u.stop(t)
}

// TestAsperathosClientFlowRunsUnchanged: an Asperathos client's flow
// (examples/asperathos/client_flow.py: submit, poll, visualizer URL, stop,
// report, errors, delete, with raise-on-error HTTP calls) passes against the
// Asperathos routes of an open pace up, its job run by the Redis worker.
func TestAsperathosClientFlowRunsUnchanged(t *testing.T) {
	t.Parallel()
	python := rediswqtest.Python(t)
	worker := filepath.Join(installedExamples(t), "rediswq-worker", "worker.py")
	payload := kubejobs(t, []string{python, worker}, serveText(t, "", strings.Repeat("item\n", 30)), 1, func(info map[string]any) {
		info["env_vars"] = map[string]any{"WORK_SECONDS": "0.5"}
		info["enable_visualizer"], info["visualizer_plugin"] = true, "k8s-grafana"
		info["visualizer_info"] = map[string]any{"datasource_type": "influxdb"}
	})
	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte(payload), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, t.TempDir())
	flow := exec.Command(python, "../../examples/asperathos/client_flow.py", u.httpURL+"/asperathos", file)
	out, err := flow.CombinedOutput()
	if err != nil {
		t.Fatalf("client flow: %v\n%s", err, out)
	}
	for _, want := range []string{"visualizer http://", "status stopped", "errors ", "deleted"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("client flow printed no %q:\n%s", want, out)
		}
	}
	// The flow stops the job once it runs, maybe before Pace has queued its
	// workload (a busy machine): items queued after the stop are refused,
	// each an error saying so; no other error may appear.
	_, errs, _ := strings.Cut(string(out), "errors ")
	errs, _, _ = strings.Cut(errs, "\n")
	if errs != "{}" && strings.Trim(strings.ReplaceAll(errs, "\"b'job stopped: it does not accept items'\"", ""), "[], ") != "" {
		t.Errorf("client flow's errors = %s, want none but items refused because the job stopped", errs)
	}
	u.stop(t)
}

// TestKubejobsCostJobIsControlledByItsCost: an Asperathos kubejobs_cost
// job on a secured pace up, whose three workers each hold 100 MB, is priced
// from its cluster_info_url (served here) by what the local runtime
// measures, overspends its desired cost and is scaled down to what it may
// spend; its detailed report carries kubejobs_cost's keys.
func TestKubejobsCostJobIsControlledByItsCost(t *testing.T) {
	t.Parallel()
	prices := serveText(t, "application/json", `{"cpu_price": 0, "memory_price": 10}`) // per GB-hour: 1 per worker
	hold := []string{"python3", "-c", "import time; held = b'x' * 100_000_000; time.sleep(600)"}
	payload := kubejobs(t, hold, serveText(t, "", "a\nb\n"), 3, func(info map[string]any) {
		cp := info["control_parameters"].(map[string]any)
		cp["trigger_down"], cp["trigger_up"], cp["min_rep"] = 0.5, 1, 1
		info["monitor_plugin"] = "kubejobs_cost"
		info["monitor_info"] = map[string]any{"expected_time": 3600, "cluster_info_url": prices, "desired_cost": 1.5}
	})
	j := startJobAPI(t)
	id := j.submitDoc(t, payload)
	bustest.Eventually(t, 90*time.Second, "the overspending job scaled down to 1 replica", func() bool {
		v := j.status(t, id)
		if final(v["status"].(string)) {
			t.Fatalf("job ended: %v", v)
		}
		return v["replicas"] == 1.0
	})
	var report map[string]map[string]any
	out, errOut, code := j.run(t, "report", id, "--detailed", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &report) != nil {
		t.Fatalf("report = %d %s %s", code, out, errOut)
	}
	over := 0
	for _, s := range report {
		if e, ok := s["application_cost_error"].(float64); ok && e > 0 && s["desired_cost"] == 1.5 && s["current_spent"].(float64) > 1.5 {
			over++
		}
	}
	if over == 0 {
		t.Errorf("no sample of the detailed report shows the overspending: %v", report)
	}
	if _, errOut, code := j.run(t, "terminate", id); code != 0 {
		t.Fatalf("terminate = %d %s", code, errOut)
	}
	j.u.stop(t)
}

// kubejobs is an Asperathos kubejobs payload running cmd with replicas
// workers (min, max and initial) on the items at workload, changed by edit.
func kubejobs(t *testing.T, cmd []string, workload string, replicas int, edit func(info map[string]any)) string {
	t.Helper()
	info := map[string]any{
		"cmd": cmd, "img": "asperathos/batch-base", "init_size": replicas, "redis_workload": workload,
		"control_plugin": "kubejobs", "control_parameters": map[string]any{"schedule_strategy": "default",
			"actuator": "k8s_replicas", "check_interval": 1, "trigger_down": 1, "trigger_up": 1, "min_rep": replicas,
			"max_rep": replicas, "actuation_size": 1, "metric_source": "redis"},
		"monitor_plugin": "kubejobs", "monitor_info": map[string]any{"expected_time": 600},
	}
	edit(info)
	doc, err := json.Marshal(map[string]any{"plugin": "kubejobs", "enable_auth": false, "plugin_info": info})
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// serveText serves body (as contentType, when given) for the test's life
// and returns its URL.
func serveText(t *testing.T, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/workload"
}

// TestBusCommandsNeedATokenOnASecuredPaceUp: pace up with a token file
// authenticates its bus; a bus command without a token is refused at
// connect, and told how to give one.
func TestBusCommandsNeedATokenOnASecuredPaceUp(t *testing.T) {
	t.Parallel()
	j := startJobAPI(t)
	cmd := exec.Command(paceBin, "results", "any-job", "--nats", j.u.natsURL)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Authorization Violation") || !strings.Contains(string(out), "--token or PACE_TOKEN") {
		t.Errorf("pace results without a token = %v: %s", err, out)
	}
}

// installedExamples copies examples/asperathos where the jobs' sandboxed
// workers can read it, as an installed copy would be (a checkout under /tmp
// is not: a sandbox has a private /tmp), and returns its path.
func installedExamples(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../../examples/asperathos")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := localtest.ProgramDir("pace-examples-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dst) })
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}
