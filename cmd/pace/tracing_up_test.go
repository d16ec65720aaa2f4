package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/tracing/tracingtest"
)

// TestOneTracePerJob runs a batch job on pace up exporting to a real OTLP
// receiver, every item traced: the job is one connected trace holding its
// submission (the HTTP request, its APF admission, the job's creation),
// each item's processing by a worker process, the controller's decisions
// and the Kubernetes-style calls through the gate with their admissions.
func TestOneTracePerJob(t *testing.T) {
	t.Parallel()
	r := tracingtest.Start(t)
	u := startUp(t, t.TempDir(), "--otlp-endpoint", r.HTTPEndpoint(), "--trace-items", "1", "--trace-url", "http://viewer/trace/{trace_id}")
	items := []string{"1", "2", "3", "4", "5", "6"}
	job := submit(t, u.httpURL, map[string]any{
		"name": "traced", "deadline": "60s", "workload": map[string]any{"items": items},
		"worker":   map[string]any{"exec": "sleep 0.3; cat"},
		"replicas": map[string]any{"min": 1, "max": 2, "initial": 1},
	})
	var view map[string]any
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		getJSON(t, u.httpURL+"/submissions/"+job, &view)
		if final(view["status"].(string)) {
			break
		}
	}
	if view["status"] != "completed" {
		t.Fatalf("job %s ended %v, want completed", job, view["status"])
	}
	traceID, _ := view["trace_id"].(string)
	var page struct {
		TraceURL string `json:"trace_url"`
	}
	if code, data := firstEvent(t, u.httpURL+"/ui/events/jobs/"+job, ""); code != http.StatusOK || json.Unmarshal([]byte(data), &page) != nil {
		t.Errorf("UI job stream: %d %s", code, data)
	}
	if page.TraceURL != "http://viewer/trace/"+traceID {
		t.Errorf("UI job page links to %q, want the viewer's URL of trace %s", page.TraceURL, traceID)
	}
	// The job's end and its teardown are in its trace too.
	bustest.Eventually(t, 2*time.Minute, "the job's resources released", func() bool {
		getJSON(t, u.httpURL+"/submissions/"+job, &view)
		return view["cleaned_at"] != nil
	})
	u.stop(t) // flushes pace up's spans; its workers flushed theirs when they were stopped
	checkJobTrace(t, r, job, traceID, len(items))
	ends := map[string]string{}
	for _, s := range r.Spans() {
		if s.TraceID == traceID && (s.Name == "finish job" || s.Name == "release job") {
			ends[s.Name] = s.Attrs["pace.job.state"]
		}
	}
	if state, ok := ends["finish job"]; !ok || state != "completed" {
		t.Errorf("finish job span: %v (state %q), want one, completed", ok, state)
	}
	if _, ok := ends["release job"]; !ok {
		t.Error("no release job span in the job's trace")
	}
}

// TestOneTracePerJobAcrossStageProcesses is TestOneTracePerJob with each
// stage in its own process: the job's trace spans the manager, controller,
// gate and worker processes, linked by the messages between them.
func TestOneTracePerJobAcrossStageProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs seven processes")
	}
	r := tracingtest.Start(t)
	natsURL := bustest.ServerAt(t, t.TempDir(), "127.0.0.1:0").ClientURL()
	var stages []*stageProc
	for _, name := range []string{"manager", "collector", "processor", "controller", "actuator", "gate"} {
		stages = append(stages, startStage(t, natsURL, name, name+"-0", "--otlp-endpoint", r.HTTPEndpoint(), "--trace-items", "1"))
	}
	for _, p := range stages {
		bustest.Eventually(t, 60*time.Second, p.identity+" ready", p.ready(t))
	}
	mgr := stages[0]
	items := []string{"1", "2", "3", "4"}
	job := submit(t, mgr.url, map[string]any{
		"name": "traced", "deadline": "60s", "workload": map[string]any{"items": items},
		"worker":   map[string]any{"exec": "sleep 0.3; cat"},
		"replicas": map[string]any{"min": 1, "max": 2, "initial": 1},
	})
	var view map[string]any
	bustest.Eventually(t, 2*time.Minute, "the job to end", func() bool {
		getJSON(t, mgr.url+"/submissions/"+job, &view)
		return final(view["status"].(string))
	})
	if view["status"] != "completed" {
		t.Fatalf("job %s ended %v, want completed", job, view["status"])
	}
	traceID, _ := view["trace_id"].(string)
	for _, p := range stages {
		p.stop(t) // each flushes its spans
	}
	services := checkJobTrace(t, r, job, traceID, len(items))
	for _, want := range []string{"pace-manager", "pace-controller", "pace-gate", "pace-worker"} {
		if !services[want] {
			t.Errorf("no span of %s in the job's trace (services: %v)", want, services)
		}
	}
}

// checkJobTrace checks that job's spans at r form one connected trace,
// traceID, rooted at its submission's request, with items item spans and
// the admission, creation, decision and kube call spans; it returns the
// services that exported them.
func checkJobTrace(t *testing.T, r *tracingtest.Receiver, job, traceID string, items int) map[string]bool {
	t.Helper()
	if len(traceID) != 32 {
		t.Fatalf("job view trace_id = %q, want a trace id", traceID)
	}

	spans := map[string]tracingtest.Span{}
	count := map[string]int{}
	var roots []string
	for _, s := range r.Spans() {
		if s.TraceID != traceID {
			continue
		}
		spans[s.SpanID] = s
		kind := s.Name
		switch {
		case strings.HasPrefix(s.Name, "process "):
			kind = "process"
		case strings.HasPrefix(s.Name, "decide "):
			kind = "decide"
		case strings.HasPrefix(s.Name, "kube "):
			kind = "kube"
		}
		count[kind]++
		if s.ParentID == "" {
			roots = append(roots, s.Name)
		}
	}
	t.Logf("job %s: trace %s, spans by kind %v", job, traceID, count)
	if len(roots) != 1 || roots[0] != "POST /submissions" {
		t.Errorf("trace roots %v, want the submission's request alone", roots)
	}
	for _, s := range spans {
		if _, ok := spans[s.ParentID]; s.ParentID != "" && !ok {
			t.Errorf("span %q (%s) has parent %s, which is not in the trace: not one connected trace", s.Name, s.Service, s.ParentID)
		}
	}
	if count["process"] != items {
		t.Errorf("%d item spans, want %d (every item traced)", count["process"], items)
	}
	for _, kind := range []string{"create job", "apf admission", "decide", "kube"} {
		if count[kind] == 0 {
			t.Errorf("no %q span in the job's trace (spans by kind: %v)", kind, count)
		}
	}
	for _, s := range spans {
		switch {
		case strings.HasPrefix(s.Name, "process "):
			if s.Service != "pace-worker" || s.Attrs["messaging.system"] != "nats" || s.Attrs["messaging.destination.name"] != "pace.work."+job {
				t.Errorf("item span %+v, want a pace-worker consumer span on pace.work.%s", s, job)
			}
		case s.Name == "apf admission":
			if s.Attrs["pace.apf.priority_level"] == "" || s.Attrs["pace.apf.queue_wait_seconds"] == "" {
				t.Errorf("admission span %+v lacks its priority level or queue wait", s)
			}
		case strings.HasPrefix(s.Name, "kube "):
			if s.Attrs["pace.kube.outcome"] == "" || s.Attrs["pace.job"] != job {
				t.Errorf("kube span %+v lacks its outcome or job", s)
			}
		}
	}
	services := map[string]bool{}
	for _, s := range spans {
		services[s.Service] = true
	}
	return services
}
