package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// TestDecisionsPrintTheirReasons runs a deadline-controlled job on pace up
// and reads its decisions: each line names the change, the controller and
// a reason with its numbers; --changes -o json gives the decisions that
// changed the replicas, as published.
func TestDecisionsPrintTheirReasons(t *testing.T) {
	t.Parallel()
	u := startUp(t, t.TempDir())
	items := make([]string, 40)
	for i := range items {
		items[i] = "x"
	}
	id := submit(t, u.httpURL, map[string]any{
		"name": "paced", "mode": "batch", "deadline": "8s", "workload": map[string]any{"items": items},
		"worker": map[string]any{"exec": "sleep 0.3; cat"}, "controller": map[string]any{"name": "deadline"},
		"replicas": map[string]any{"min": 1, "max": 4},
	})
	var status string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var v map[string]any
		getJSON(t, u.httpURL+"/submissions/"+id, &v)
		if status, _ = v["status"].(string); final(status) {
			break
		}
	}
	if status != "completed" {
		t.Fatalf("job ended %q, want completed", status)
	}
	text := strings.TrimSpace(u.pace(t, "", "decisions", id))
	line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  (\d+ → \d+|\d+ kept) +deadline +\S.*\d`)
	lines := strings.Split(text, "\n")
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("decision line %q: want time, change, controller deadline and a reason with numbers", l)
		}
	}
	var changes []schemas.Decision
	for l := range strings.SplitSeq(strings.TrimSpace(u.pace(t, "", "decisions", id, "--changes", "-o", "json")), "\n") {
		var d schemas.Decision
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("-o json line %q: %v", l, err)
		}
		if d.Replicas == d.Current || d.Job != id || d.Reason == "" {
			t.Errorf("--changes printed %+v, want a change of %s with its reason", d, id)
		}
		changes = append(changes, d)
	}
	if len(changes) == 0 || len(changes) > len(lines) {
		t.Errorf("%d changes among %d decisions, want at least one (the job starts at 1 and ends at 0)", len(changes), len(lines))
	}
	if t.Failed() {
		t.Logf("decisions:\n%s", text)
	}
}
