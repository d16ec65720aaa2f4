package pods

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRestrictedRootIsReadOnly: runc enforces the restricted security
// context of a worker pod: a write to the image's filesystem fails, even
// to a directory any user may write (its item is a dead letter), while
// /tmp, Pace's emptyDir, is writable; worker.security.writable_root lifts
// it, and the same write succeeds. Workers run as uid 65532.
func TestRestrictedRootIsReadOnly(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	ns := namespace(t, "security")
	u := startUp(t)
	for _, tc := range []struct {
		name     string
		security map[string]any
		want     string
	}{
		{"restricted", nil, "failed"},
		{"writable-root", map[string]any{"writable_root": true}, "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			worker := map[string]any{"image": paceImage, "command": []string{"pace", "worker", "$(PACE_JOB)",
				"--exec", "touch /tmp/ok && touch /var/lib/pace/probe-$PACE_ITEM_ID && id -u"}}
			if tc.security != nil {
				worker["security"] = tc.security
			}
			doc, _ := json.Marshal(map[string]any{"name": "sec-" + tc.name, "mode": "batch", "deadline": "10m", "max_deliveries": 1,
				"workload": map[string]any{"items": []string{"x"}}, "worker": worker,
				"replicas": map[string]any{"min": 1, "max": 1, "initial": 1},
				"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
			id := u.submit(t, string(doc))
			v := u.waitFinal(t, id, 3*time.Minute)
			if v["status"] != tc.want {
				t.Fatalf("job ended %v (%v), want %s", v["status"], v["reason"], tc.want)
			}
			if tc.want == "completed" {
				if got := strings.TrimSpace(u.pace(t, false, "results", id)); got != "65532" {
					t.Errorf("the worker ran as uid %q, want 65532", got)
				}
				return
			}
			errs := u.pace(t, false, "dead-letters", "list", id, "-o", "json")
			if !strings.Contains(errs, "Read-only file system") {
				t.Errorf("dead letters lack the read-only root's error:\n%s", errs)
			}
		})
	}
}
