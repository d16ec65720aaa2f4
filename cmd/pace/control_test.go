package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLocalJobNeedingThreeReplicasMeetsItsDeadline is the control loop end
// to end on one machine: 1,500 items of 50 ms (75 s of work, about 80 s
// with each item's fork) due in 30 s, so at least three workers are needed
// (two would take 40 s; at half the work for twice the time, 2,000 items in
// 60 s, two workers met the deadline in 54 s once the controller had
// measured the rate);
// the deadline controller scales out and the job completes, in time unless
// a loaded machine slows every item and the controller is at its maximum.
func TestLocalJobNeedingThreeReplicasMeetsItsDeadline(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a half-minute job")
	}
	const maxReplicas = 8
	u := startUp(t, t.TempDir())
	items := make([]string, 1500) // 75 s of work: 2.5 replicas for the whole 30 s, more after the first one's start
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	jobID := submit(t, u.httpURL, map[string]any{
		"name": "three", "mode": "batch", "deadline": "30s", "item_timeout": "10s",
		"workload":   map[string]any{"items": items},
		"worker":     map[string]any{"exec": "sleep 0.05; cat"},
		"replicas":   map[string]any{"min": 1, "max": maxReplicas, "initial": 1},
		"controller": map[string]any{"name": "deadline"},
	})

	var status string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var v map[string]any
		getJSON(t, u.httpURL+"/submissions/"+jobID, &v)
		if status, _ = v["status"].(string); final(status) {
			break
		}
	}
	if status != "completed" {
		t.Fatalf("job ended %q, want completed", status)
	}
	var sum struct {
		DeadlineMet *bool `json:"deadline_met"`
		ItemsOK     int   `json:"items_ok"`
	}
	getJSON(t, u.httpURL+"/submissions/"+jobID+"/report/summary", &sum)
	if sum.DeadlineMet == nil || sum.ItemsOK != len(items) {
		t.Fatalf("summary: deadline met %s, %d items ok; want a verdict and %d", fmtBool(sum.DeadlineMet), sum.ItemsOK, len(items))
	}
	var detail map[string]struct {
		Replicas int `json:"replicas"`
	}
	getJSON(t, u.httpURL+"/submissions/"+jobID+"/report", &detail)
	most := 0
	for _, sample := range detail {
		most = max(most, sample.Replicas)
	}
	switch {
	case most < 3:
		t.Errorf("at most %d replicas; the deadline needs at least 3", most)
	case !*sum.DeadlineMet && most < maxReplicas:
		// Met on an idle machine with 3 to 4 replicas; on a loaded one
		// each item takes longer, and the controller must then have gone
		// up to its maximum before missing the deadline.
		t.Errorf("deadline missed with at most %d of %d replicas", most, maxReplicas)
	case !*sum.DeadlineMet:
		t.Logf("deadline missed at the maximum of %d replicas: the machine is too loaded for this job", maxReplicas)
	}
	// Releasing idle replicas at the tail is checked on a fake clock
	// (deadline_test.go, "tail releases idle replicas at once"): here,
	// whether the report samples the tail before completion is a matter of
	// timing an unloaded machine can miss.
	u.stop(t)
}

// submit posts spec to the job API at base and returns the new job's id.
func submit(t *testing.T, base string, spec map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(spec)
	resp, err := http.Post(base+"/submissions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %s", resp.Status)
	}
	return created.JobID
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// fmtBool prints an optional verdict.
func fmtBool(b *bool) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprint(*b)
}
