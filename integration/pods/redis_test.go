package pods

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRedisWorkerRunsInPods: a job whose workers speak the Redis protocol
// runs the go-redis worker image (examples/asperathos/goredis-worker, the
// rediswq command sequence) as pods, which reach pace up's Redis front on
// the bridge with their job's token as the queue's name: every item gets
// exactly one result and the job completes.
func TestRedisWorkerRunsInPods(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	ns := namespace(t, "redis")
	u := startUp(t)
	work := items(24)
	doc, _ := json.Marshal(map[string]any{"name": "redis", "mode": "batch", "deadline": "10m",
		"workload": map[string]any{"items": work},
		"worker": map[string]any{"image": redisWorkerImage, "protocol": "redis",
			"env": map[string]string{"CONCURRENCY": "2", "WORK_SECONDS": "0.2", "GIVE_BACK": "1"}},
		"replicas": map[string]any{"min": 1, "max": 2, "initial": 2},
		// Each item given back (GIVE_BACK) is redelivered, which the
		// before_first_result rule counts as a failure: with 2 pods of 2
		// connections starting together, 4 give-backs may come before the
		// first result and fail the job.
		"failure":  map[string]any{"disable": []string{"before_first_result"}},
		"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
	id := u.submit(t, string(doc))
	if v := u.waitFinal(t, id, 3*time.Minute); v["status"] != "completed" {
		t.Fatalf("job ended %v (%v), want completed\npods:\n%s", v["status"], v["reason"], podSummary(t))
	}
	results := strings.Fields(u.pace(t, false, "results", id))
	want := make([]string, len(work))
	for i, w := range work {
		want[i] = strings.ToUpper(w)
	}
	slices.Sort(results)
	if !slices.Equal(results, want) {
		t.Errorf("results:\n got %v\nwant %v", results, want)
	}
}
