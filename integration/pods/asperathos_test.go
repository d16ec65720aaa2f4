package pods

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// TestAsperathosPayloadRunsInPods: an Asperathos payload naming a cluster
// registered for the node (POST /submissions/cluster, as Asperathos' users
// register theirs) runs its image, the go-redis worker, as pods: they take
// their items from the Redis front with their job's token, every item gets
// one result, and the job completes. pace up runs no local workers here,
// so the job can complete only through the pods.
func TestAsperathosPayloadRunsInPods(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	u := startUp(t)
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"cluster_name": "node", "cluster_config": string(conf)})
	req, _ := http.NewRequest(http.MethodPost, u.httpURL+"/submissions/cluster", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer root-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("register the cluster: %s %s", resp.Status, out)
	}

	work := items(20)
	workload := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Join(work, "\n")+"\n")
	}))
	defer workload.Close()
	doc, _ := json.Marshal(map[string]any{"plugin": "kubejobs", "enable_auth": false, "plugin_info": map[string]any{
		"cmd": []string{"/usr/local/bin/goredis-worker"}, "img": redisWorkerImage, "init_size": 2, "redis_workload": workload.URL,
		"cluster_name": "node", "env_vars": map[string]any{"CONCURRENCY": "2", "WORK_SECONDS": "0.2"},
		"control_plugin": "kubejobs", "control_parameters": map[string]any{"schedule_strategy": "default",
			"actuator": "k8s_replicas", "check_interval": 1, "trigger_down": 1, "trigger_up": 1, "min_rep": 2,
			"max_rep": 2, "actuation_size": 1, "metric_source": "redis"},
		"monitor_plugin": "kubejobs", "monitor_info": map[string]any{"expected_time": 600}}})
	id := u.submit(t, string(doc))
	most := 0 // the job's worker containers seen running at once
	v := u.waitFinal(t, id, 3*time.Minute, func() {
		pods, err := admin.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: kubeactuator.LabelJob + "=" + id})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) > 0 {
			most = max(most, runningContainers(t, pods.Items[0].Namespace, id))
		}
	})
	if v["status"] != "completed" {
		t.Fatalf("job ended %v (%v), want completed\npods:\n%s", v["status"], v["reason"], podSummary(t))
	}
	if most == 0 {
		t.Errorf("no worker container of %s was seen running", id)
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
