package pods

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCrashingImageFailsTheJob: a worker image whose command exits 1 at
// start fails its job by the before_first_result rule, its pod counted as
// an exit, and the container's own output is in the job's log.
func TestCrashingImageFailsTheJob(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	ns := namespace(t, "crash")
	u := startUp(t)
	doc, _ := json.Marshal(map[string]any{"name": "crash", "mode": "batch", "deadline": "10m",
		"workload": map[string]any{"items": items(3)},
		"worker":   map[string]any{"image": paceImage, "command": []string{"sh", "-c", "echo worker-cannot-start >&2; exit 1"}},
		"replicas": map[string]any{"min": 1, "max": 1, "initial": 1},
		"failure":  map[string]any{"before_first_result": 1}, // the Job controller waits 10 s, then 20 s, before the next pods
		"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
	id := u.submit(t, string(doc))
	v := u.waitFinal(t, id, 3*time.Minute)
	if v["status"] != "failed" {
		t.Fatalf("job ended %v (%v), want failed", v["status"], v["reason"])
	}
	if reason, _ := v["reason"].(string); !strings.Contains(reason, "before_first_result") || !strings.Contains(reason, "exited 1") {
		t.Errorf("reason %q, want the before_first_result rule and the exit", reason)
	}
	logs := u.pace(t, true, "logs", id)
	if !strings.Contains(logs, "worker-cannot-start") {
		t.Errorf("the job's log lacks the container's output:\n%s", logs)
	}
}

// TestMissingImageFailsTheJob: an image the node does not have (and no
// registry serves) fails the job with a reason naming the image pull,
// instead of leaving it waiting.
func TestMissingImageFailsTheJob(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	ns := namespace(t, "missing")
	u := startUp(t)
	doc, _ := json.Marshal(map[string]any{"name": "missing", "mode": "batch", "deadline": "10m",
		"workload": map[string]any{"items": items(3)},
		"worker":   map[string]any{"image": "pace.local/no-such-image:1", "command": []string{"pace", "worker"}},
		"replicas": map[string]any{"min": 1, "max": 1, "initial": 1},
		"failure":  map[string]any{"pods": "10s"},
		"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
	id := u.submit(t, string(doc))
	v := u.waitFinal(t, id, 3*time.Minute)
	reason, _ := v["reason"].(string)
	if v["status"] != "failed" || !strings.Contains(reason, "ImagePull") {
		t.Fatalf("job ended %v (%q), want failed for the image pull", v["status"], reason)
	}
}
