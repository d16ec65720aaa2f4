package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
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
