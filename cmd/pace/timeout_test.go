package main

import (
	"strings"
	"testing"
	"time"
)

// TestHungItemIsCutOffByWorkerTimeout runs, on pace up, a job whose command
// notes each item on stderr and hangs on one: with worker.timeout 2s each attempt is cut off (SIGTERM,
// then SIGKILL after the termination grace, which the command ignoring
// SIGTERM needs), fails as "timed out after 2s" in the job's log, and after
// max_deliveries the item is dead-lettered with that reason while the
// other items get their results and the job ends. Every stderr line, of
// the items that succeeded and of each hung attempt, is in the job's log.
func TestHungItemIsCutOffByWorkerTimeout(t *testing.T) {
	t.Parallel()
	u := startUp(t, t.TempDir())
	id := submit(t, u.httpURL, map[string]any{
		"name": "hang", "mode": "batch", "deadline": "10m", "max_deliveries": 2,
		"workload": map[string]any{"items": []string{"a", "hang", "b"}},
		"worker": map[string]any{"exec": `read x; echo "note: $x" >&2; if [ "$x" = hang ]; then trap '' TERM; sleep 600; fi; echo "$x"`,
			"timeout": "2s", "termination_grace": "1s"},
	})
	var status string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var v map[string]any
		getJSON(t, u.httpURL+"/submissions/"+id, &v)
		if status, _ = v["status"].(string); final(status) {
			break
		}
	}
	if !final(status) {
		t.Fatalf("job still %q after 2 minutes", status)
	}
	if list := u.pace(t, "", "dead-letters", "list", id); strings.Count(list, "max_deliveries") != 1 {
		t.Errorf("dead letters of %s:\n%s\nwant one, max_deliveries", id, list)
	}
	if dead := u.pace(t, "", "dead-letters", "show", "1"); !strings.Contains(dead, "timed out after 2s") || !strings.Contains(dead, "hang") {
		t.Errorf("the dead letter:\n%s\nwant the hung item's, timed out after 2s", dead)
	}
	results := u.pace(t, "", "results", id)
	if !strings.Contains(results, "a") || !strings.Contains(results, "b") || strings.Contains(results, "hang") {
		t.Errorf("results:\n%s\nwant a and b only", results)
	}
	out := u.pace(t, "", "logs", id, "--api", u.httpURL)
	if n := strings.Count(out, "timed out"); n < 2 {
		t.Errorf("the job's log tells of %d timeouts, want one per attempt (2):\n%s", n, out)
	}
	// What the commands wrote on stderr is in the log too, read as fields:
	// a succeeding item's, and the hung one's of each attempt.
	for _, want := range []string{`INFO item stderr`, `line="note: a"`, `line="note: b"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the job's log lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `line="note: hang"`); n != 2 {
		t.Errorf("the hung item's stderr is in the log %d times, want once per attempt (2):\n%s", n, out)
	}
}
