package pods

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// items returns n item payloads, item-00 … .
func items(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("item-%02d", i)
	}
	return out
}

// TestBatchJobRunsInPods: a native batch job with actuator kubernetes runs
// its worker.exec in pods of the pace image, whose `pace worker` reaches
// pace up's NATS on
// the bridge with its job's token: every item gets exactly one result, the
// initial parallelism runs as that many containers, and the job completes.
func TestBatchJobRunsInPods(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	ns := namespace(t, "batch")
	u := startUp(t)
	work := items(30)
	doc, _ := json.Marshal(map[string]any{"name": "upper", "mode": "batch", "deadline": "10m",
		"workload": map[string]any{"items": work},
		"worker":   map[string]any{"image": paceImage, "exec": "sleep 0.2; tr a-z A-Z"}, // run under `pace worker`, as locally
		"replicas": map[string]any{"min": 1, "max": 3, "initial": 3},
		"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
	id := u.submit(t, string(doc))
	most := 0
	if v := u.waitFinal(t, id, 3*time.Minute, func() { most = max(most, runningContainers(t, ns, id)) }); v["status"] != "completed" {
		t.Fatalf("job ended %v: %v\npods:\n%s", v["status"], v["reason"], podSummary(t))
	}
	if most != 3 {
		t.Errorf("at most %d worker containers of the job ran at once, want its initial parallelism 3", most)
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
