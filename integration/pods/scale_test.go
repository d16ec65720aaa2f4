package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pace-platform/pace/integration/kubetest"
	kubeactuator "github.com/pace-platform/pace/stages/gate/targets/kubernetes"
)

// tally counts what worker pods report over HTTP on the bridge:
// /start/ITEM and /end/ITEM around each item's work.
type tally struct {
	url string

	mu           sync.Mutex
	starts, ends map[string]int
	running      map[string]string    // pod IP → the item it works on
	started      map[string]time.Time // pod IP → when it began that item
	events       []string             // for failures: when, who, what
}

func newTally(t *testing.T) *tally {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(kubetest.Gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	c := &tally{url: "http://" + l.Addr().String(), starts: map[string]int{}, ends: map[string]int{}, running: map[string]string{},
		started: map[string]time.Time{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		c.events = append(c.events, time.Now().Format("15:04:05.000")+" "+ip+" "+r.URL.Path)
		if item, ok := strings.CutPrefix(r.URL.Path, "/start/"); ok {
			c.starts[item]++
			c.running[ip], c.started[ip] = item, time.Now()
		}
		if item, ok := strings.CutPrefix(r.URL.Path, "/end/"); ok {
			c.ends[item]++
			delete(c.running, ip)
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

// exec is a worker command that reports its item's start and end around
// seconds of work, then upper-cases it.
func (c *tally) exec(seconds float64) string {
	return fmt.Sprintf("wget -q -O /dev/null %[1]s/start/$PACE_ITEM_ID && sleep %[2]g && wget -q -O /dev/null %[1]s/end/$PACE_ITEM_ID && tr a-z A-Z", c.url, seconds)
}

func (c *tally) counts() (starts, ends map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.starts), maps.Clone(c.ends)
}

// runningContainers counts the worker containers of job in ns that run, in
// pods not being deleted.
func runningContainers(t *testing.T, ns, job string) int {
	t.Helper()
	pods, err := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kubeactuator.LabelJob + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if p.DeletionTimestamp == nil && c.Name == kubeactuator.WorkerContainer && c.State.Running != nil {
				n++
			}
		}
	}
	return n
}

// TestScaleDownLosesNothing: the KEDA-style lag controller (hpa) scales a
// job down from its initial parallelism part-way through, while its pods
// work on items: the Job controller deletes pods, whose pace worker finishes
// its item within the grace; the running worker containers come down to the
// new parallelism, and every item was worked on once, ended once, and has
// one result. (The deadline controller keeps busy replicas until the queue
// drains, so its scale-downs come in a job's last seconds.)
//
// It runs alone, before the parallel tests, so that its pods start quickly.
func TestScaleDownLosesNothing(t *testing.T) {
	ns := namespace(t, "scale")
	u := startUp(t)
	tl := newTally(t)
	// Lag (queued and running items) over 25 per replica wants 5, held at
	// max 4, until 75 are left: then 3, which do the rest.
	work := items(120)
	doc, _ := json.Marshal(map[string]any{"name": "scale", "mode": "batch", "deadline": "30m",
		"workload": map[string]any{"items": work},
		"worker":   map[string]any{"image": paceImage, "command": []string{"pace", "worker", "$(PACE_JOB)", "--exec", tl.exec(1)}},
		"replicas": map[string]any{"min": 3, "max": 4, "initial": 4},
		"controller": map[string]any{"name": "hpa", "check_interval": "1s", "params": map[string]any{
			"target": 25, "scale_down_window": "0s"}},
		"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
	id := u.submit(t, string(doc))
	ctx := context.Background()
	var parallelism []int32 // each change of the Job's parallelism
	followed := false       // running containers came down to a lowered parallelism
	endedAtDrop := -1       // items ended when the parallelism was first seen lowered
	v := u.waitFinal(t, id, 4*time.Minute, func() {
		if j, err := admin.BatchV1().Jobs(ns).Get(ctx, kubeactuator.Name(id), metav1.GetOptions{}); err == nil && j.Spec.Parallelism != nil {
			// 0 is the scale-down once the job has completed.
			if p := *j.Spec.Parallelism; p > 0 && (len(parallelism) == 0 || parallelism[len(parallelism)-1] != p) {
				parallelism = append(parallelism, p)
				if p < 4 && endedAtDrop < 0 {
					_, ends := tl.counts()
					endedAtDrop = len(ends)
				}
			}
		}
		if n := len(parallelism); n > 1 && parallelism[n-1] < 4 && int32(runningContainers(t, ns, id)) == parallelism[n-1] {
			followed = true
		}
	})
	if v["status"] != "completed" {
		t.Fatalf("job ended %v: %v\npods:\n%s", v["status"], v["reason"], podSummary(t))
	}
	t.Logf("the Job's parallelism: %v, lowered after %d of %d items ended", parallelism, endedAtDrop, len(work))
	if len(parallelism) < 2 || parallelism[0] != 4 || slices.Min(parallelism) >= 4 || endedAtDrop < 1 || endedAtDrop > len(work)-10 {
		t.Errorf("the Job's parallelism went %v (lowered after %d items ended), want 4 then lower while items ran; the controller's decisions:\n%s",
			parallelism, endedAtDrop, u.pace(t, false, "decisions", id))
	}
	if !followed {
		t.Errorf("the running worker containers never came down to the Job's lowered parallelism (%v)", parallelism)
	}
	starts, ends := tl.counts()
	if len(starts) != len(work) || len(ends) != len(work) {
		t.Errorf("%d items started, %d ended, want %d each", len(starts), len(ends), len(work))
	}
	for item, n := range starts {
		if n != 1 || ends[item] != 1 {
			t.Errorf("item %s started %d times, ended %d times, want once each", item, n, ends[item])
		}
	}
	results := strings.Fields(u.pace(t, false, "results", id))
	want := make([]string, len(work))
	for i, w := range work {
		want[i] = strings.ToUpper(w)
	}
	slices.Sort(results)
	slices.Sort(want)
	if !slices.Equal(results, want) {
		t.Errorf("results:\n got %v\nwant %v", results, want)
	}
}

// TestKilledPodItemIsDoneAgainOnce: a worker container killed (SIGKILL,
// through containerd) in the middle of an item: the item's lease runs out
// and another pod does it again, once; every item ends with one result and
// the job completes, its crashed pod counted as an exit after results.
func TestKilledPodItemIsDoneAgainOnce(t *testing.T) {
	t.Parallel() // its own namespace and pace up; the node runs several jobs at once
	ns := namespace(t, "kill")
	u := startUp(t)
	tl := newTally(t)
	work := items(16)
	doc, _ := json.Marshal(map[string]any{"name": "kill", "mode": "batch", "deadline": "30m", "item_timeout": "5s",
		"workload": map[string]any{"items": work},
		"worker":   map[string]any{"image": paceImage, "command": []string{"pace", "worker", "$(PACE_JOB)", "--exec", tl.exec(2)}},
		"replicas": map[string]any{"min": 2, "max": 2, "initial": 2},
		"actuator": map[string]any{"name": "kubernetes", "namespace": ns}})
	id := u.submit(t, string(doc))
	ctx := context.Background()
	victim := "" // the pod IP
	deadline := time.Now().Add(2 * time.Minute)
	for victim == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no pod found in the middle of an item after 3 results\npods:\n%s", podSummary(t))
		}
		time.Sleep(100 * time.Millisecond)
		tl.mu.Lock()
		done, running := len(tl.ends), map[string]bool{}
		for ip := range tl.running {
			// At least a second of its 2 s item left: the kill lands in it,
			// not just after it (a pod seen busy may have been ending).
			running[ip] = time.Since(tl.started[ip]) < time.Second
		}
		tl.mu.Unlock()
		if done < 3 || len(running) == 0 {
			continue
		}
		pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubeactuator.LabelJob + "=" + id})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !running[p.Status.PodIP] || len(p.Status.ContainerStatuses) == 0 {
				continue
			}
			container := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
			if out, err := exec.Command("ctr", "--address", node.Socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", container).CombinedOutput(); err != nil {
				t.Fatalf("kill the container of pod %s: %v: %s", p.Name, err, out)
			}
			victim = p.Status.PodIP
			t.Logf("%s killed pod %s (%s)", time.Now().Format("15:04:05.000"), p.Name, victim)
			break
		}
	}
	// The item it was working on when it died: it began and never ended there.
	time.Sleep(time.Second)
	tl.mu.Lock()
	killed := tl.running[victim]
	tl.mu.Unlock()
	if killed == "" {
		t.Fatalf("pod %s was between items when it was killed: nothing to check", victim)
	}
	if v := u.waitFinal(t, id, 3*time.Minute); v["status"] != "completed" {
		t.Fatalf("job ended %v (%v), want completed\npods:\n%s", v["status"], v["reason"], podSummary(t))
	}
	starts, ends := tl.counts()
	for item, n := range starts {
		want := 1
		if item == killed {
			want = 2
		}
		if n != want || ends[item] != 1 {
			t.Errorf("item %s started %d times, ended %d times, want %d and 1", item, n, ends[item], want)
		}
	}
	if len(ends) != len(work) {
		t.Errorf("%d items ended, want %d", len(ends), len(work))
	}
	if t.Failed() {
		tl.mu.Lock()
		t.Logf("what the workers reported:\n%s\npods:\n%s", strings.Join(tl.events, "\n"), podSummary(t))
		tl.mu.Unlock()
	}
	results := strings.Fields(u.pace(t, false, "results", id))
	if len(results) != len(work) {
		t.Errorf("%d results, want %d: %v", len(results), len(work), results)
	}
}
