package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// squaresOrCrash squares each line, noting its process's pid in dir/pids,
// and crashes on item 13 the first time it sees it (dir/crashed marks it).
func squaresOrCrash(dir string) string {
	return fmt.Sprintf(`echo $$ >> '%[1]s/pids'; while IFS= read -r n; do
	  if [ "$n" = 13 ] && mkdir '%[1]s/crashed' 2>/dev/null; then echo "crash on $n" >&2; exit 7; fi
	  echo $((n*n)); done`, dir)
}

// checkSquares requires one result per item 1..n, each its square.
func checkSquares(t *testing.T, results []jsonResult, n int) {
	t.Helper()
	var got []int
	ids := map[string]bool{}
	for _, r := range results {
		v, err := strconv.Atoi(r.Result)
		if err != nil {
			t.Fatalf("result %q is not a number", r.Result)
		}
		got = append(got, v)
		ids[r.ItemID] = true
	}
	sort.Ints(got)
	if len(got) != n || len(ids) != n {
		t.Fatalf("%d results for %d distinct items, want %d", len(got), len(ids), n)
	}
	for i, v := range got {
		if want := (i + 1) * (i + 1); v != want {
			t.Fatalf("sorted results[%d] = %d, want %d (all: %v)", i, v, want, got)
		}
	}
}

// processesStarted returns how many processes noted their pid in dir/pids.
func processesStarted(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(string(b)))
}

// TestWorkerLinesMode: with --exec-mode lines -c 3 a job's items stream
// through at most one process per slot; the process that crashes on an item
// is replaced, that item is retried, and every item has one result.
func TestWorkerLinesMode(t *testing.T) {
	t.Parallel()
	u := startUp(t, t.TempDir())
	dir := t.TempDir()
	const n = 60
	var in strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&in, "%d\n", i)
	}
	u.pace(t, in.String(), "push", "lines")
	worker := startWorker(t, u, "lines", squaresOrCrash(dir), "--exec-mode", "lines", "-c", "3", "--retry-delay", "50ms")
	results := parseResults(t, u.pace(t, "", "results", "lines", "-o", "json"))
	stopWorker(t, worker)

	checkSquares(t, results, n)
	if _, err := os.Stat(filepath.Join(dir, "crashed")); err != nil {
		t.Fatalf("no process crashed on item 13: %v", err)
	}
	// The crashed process and its replacement, and up to 2 more slots.
	if got := processesStarted(t, dir); got < 2 || got > 4 {
		t.Errorf("%d processes served %d items on 3 slots with one crash, want 2 to 4", got, n)
	}
	if stderr := worker.Stderr.(fmt.Stringer).String(); !strings.Contains(stderr, "crash on 13") {
		t.Errorf("the process's stderr did not reach the worker's:\n%s", stderr)
	}
	u.stop(t)
}

// TestSubmittedJobInJSONMode: a job spec's worker.exec_mode reaches the
// workers the local actuator starts.
func TestSubmittedJobInJSONMode(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed")
	}
	// The workers note their processes in the test's directory: they run
	// as Pace's own user (the sandbox has its tests in stages/gate/targets/local).
	u := startUp(t, t.TempDir(), "--local-exec-unsandboxed")
	dir := t.TempDir()
	const n = 40
	items := make([]string, n)
	for i := range items {
		items[i] = strconv.Itoa(i + 1)
	}
	jobID := submit(t, u.httpURL, map[string]any{
		"name": "json", "mode": "batch", "deadline": "5m", "workload": map[string]any{"items": items},
		"worker": map[string]any{"exec_mode": "json",
			"exec": fmt.Sprintf(`echo $$ >> '%s/pids'; exec jq -c --unbuffered '{id, result: (.payload | tonumber | . * . | tostring)}'`, dir)},
	})
	var status string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var v map[string]any
		getJSON(t, u.httpURL+"/submissions/"+jobID, &v)
		if status, _ = v["status"].(string); final(status) {
			break
		}
	}
	if status != "completed" {
		t.Fatalf("job ended %q, want completed", status)
	}
	checkSquares(t, parseResults(t, u.pace(t, "", "results", jobID, "-o", "json")), n)
	if got := processesStarted(t, dir); got != 1 {
		t.Errorf("%d processes served the job's %d items (one replica, concurrency 1), want 1", got, n)
	}
	u.stop(t)
}
