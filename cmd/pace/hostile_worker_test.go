package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/localtest"
)

// grab is a hostile item command: it reports, as "key: value" lines (its
// result), every secret of Pace's and of bob's it reaches. $DATA is Pace's
// data directory, $TOKENS its --token-file, $BOB bob's job.
const grab = `
echo "pace env: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c pace-env-secret)"
echo "bob's token: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c "^PACE_TOKEN=job:$BOB")"
echo "own token: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c "^PACE_TOKEN=job:$PACE_JOB")"
echo "data: $(ls "$DATA" >/dev/null 2>&1 && echo listed || echo refused)"
echo "job-token.key: $(cat "$DATA/job-token.key" 2>/dev/null | wc -c)"
echo "tokens: $(cat "$TOKENS" 2>/dev/null | wc -c)"
echo "processes: $(ls /proc | grep -c '^[0-9]')"
echo "signal pid 1: $(kill -0 1 2>/dev/null && echo allowed || echo refused)"
echo "ptrace pid 1: $(python3 -c 'import ctypes; print(ctypes.CDLL(None, use_errno=True).ptrace(16, 1, 0, 0))' 2>&1)"
echo "uid: $(id -u)"
`

// TestAWorkerCommandReachesNoSecret: on pace up --token-file, alice's item
// command (nats.go is not even needed: a shell) tries every secret within
// reach of a job's code — Pace's environment and bob's worker's (with bob's
// job token) through /proc, Pace's data directory, job-token.key and token
// file, Pace's processes by signal and ptrace — while bob's worker runs.
// Each attempt is refused; its own job's token is all it holds.
func TestAWorkerCommandReachesNoSecret(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root, as CI does: pace up then gives each job a user of its own")
	}
	t.Setenv("PACE_HOSTILE_SECRET", "pace-env-secret") // pace up's environment
	dir, err := localtest.ProgramDir("pace-hostile-")  // not under /tmp, which sandboxes replace anyway
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	j := startJobAPIAt(t, dir)
	asBob := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(paceBin, args...)
		cmd.Env = append(os.Environ(), "PACE_API="+j.u.httpURL, "PACE_NATS_URL="+j.u.natsURL, "PACE_TOKEN=bob-token")
		cmd.Stdin = strings.NewReader("hello\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pace %s as bob: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	// bob's streaming job: one result proves its worker runs, holding
	// bob's job token, while alice's command looks.
	spec := filepath.Join(t.TempDir(), "bob.json")
	if err := os.WriteFile(spec, []byte(`{"name":"bob","mode":"streaming","worker":{"exec":"cat"},"replicas":{"min":1,"max":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bob := asBob("submit", spec)
	asBob("push", bob)
	bustest.Eventually(t, 2*time.Minute, "bob's result", func() bool { return strings.Contains(asBob("results", bob), "hello") })

	doc, err := json.Marshal(map[string]any{"name": "grab", "mode": "batch", "deadline": "10m",
		"workload": map[string]any{"items": []string{"x"}},
		"worker": map[string]any{"exec": grab, "env": map[string]string{"BOB": bob, "DATA": filepath.Join(dir, "data"),
			"TOKENS": j.tokens}}})
	if err != nil {
		t.Fatal(err)
	}
	alice := j.submitDoc(t, string(doc))
	var out string
	bustest.Eventually(t, 2*time.Minute, "alice's result", func() bool {
		out = j.u.pace(t, "", "results", alice, "-o", "json")
		return strings.TrimSpace(out) != ""
	})
	var res struct{ Result string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("alice's result %q: %v", out, err)
	}
	got := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(res.Result), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		got[k] = v
	}
	want := map[string]string{"pace env": "0", "bob's token": "0", "own token": "1", "data": "refused",
		"job-token.key": "0", "tokens": "0", "signal pid 1": "refused", "ptrace pid 1": "-1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if n, err := strconv.Atoi(got["processes"]); err != nil || n > 8 {
		t.Errorf("alice's command sees %q processes, want only its own sandbox's", got["processes"])
	}
	if uid, _ := strconv.Atoi(got["uid"]); uid < 61184 {
		t.Errorf("alice's command runs as uid %q, want a job user's", got["uid"])
	}
	if t.Failed() {
		t.Logf("alice's command reported:\n%s", res.Result) // pace up's log follows
	}
}
