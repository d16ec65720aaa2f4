package manager_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// asp is path under the Asperathos routes.
func asp(path string) string { return manager.AsperathosPrefix + path }

func TestAsperathosRoutesAnswerAsAsperathosDid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, s := range []struct {
		method, path, token, body string
		want                      int
		body1                     string // the answer's body, trimmed; "" for any
	}{
		{"GET", asp("/submissions/kj-nope"), "alice-token", "", 400, ""},
		{"GET", "/submissions/kj-nope", "alice-token", "", 404, ""}, // Pace's own answer
		{"GET", asp("/submissions/kj-nope/errors"), "alice-token", "", 200, "{}"},
		{"GET", asp("/submissions/kj-nope.json"), "alice-token", "", 400, ""},
		{"GET", asp("/visualizing/kj-nope"), "alice-token", "", 400, ""},
		{"GET", asp("/healthz"), "", "", 200, `"OK"`},
		{"POST", asp("/submissions/cluster"), "root-token", `{"cluster_name":"lab","cluster_config":"x"}`, 202, `{"cluster_name":"lab","status":"success"}`},
		{"PUT", asp("/submissions/cluster/lab/activate"), "root-token", "", 200, `{"cluster_name":"lab","status":"success"}`},
		{"PUT", "/submissions/cluster/lab/activate", "root-token", "", 200, `{"cluster_name":"lab","status":"active"}`},
	} {
		r := e.do(s.method, s.path, s.token, s.body)
		if r.code != s.want || s.body1 != "" && strings.TrimSpace(string(r.body)) != s.body1 {
			t.Errorf("%s %s = %d %s, want %d %s", s.method, s.path, r.code, r.body, s.want, s.body1)
		}
		if got := r.hdr.Get("Access-Control-Allow-Origin"); strings.HasPrefix(s.path, manager.AsperathosPrefix) != (got == "*") {
			t.Errorf("%s %s: Access-Control-Allow-Origin %q", s.method, s.path, got)
		}
	}
	pre := e.do("OPTIONS", asp("/submissions"), "", "")
	if pre.code != http.StatusNoContent || !strings.Contains(pre.hdr.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight = %d %v", pre.code, pre.hdr)
	}
}

func TestAsperathosRoutesReadWhatAsperathosAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doc := asperathos(t, e.files.URL+"/three.txt", func(doc, info map[string]any) {
		doc["client_version"] = "1.0"                                             // unknown fields, at the top and inside
		info["job_resources_lifetime"] = "120"                                    // a number as a string
		info["monitor_info"] = map[string]any{"expected_time": 89.6, "note": "x"} // a float where seconds are whole
		info["cmd"] = []any{}                                                     // the image's entrypoint
		info["init_size"] = 1                                                     // below min_rep
		c := cp(info)
		c["min_rep"], c["max_rep"] = 2, 4
		delete(c, "schedule_strategy") // Asperathos ran such a job unscaled
	})
	r := e.do("POST", "/submissions", "alice-token", doc)
	if r.code != http.StatusBadRequest {
		t.Fatalf("Pace's own route = %d %s, want 400", r.code, r.body)
	}
	var strict schemas.APIError
	r.json(t, &strict)
	var fields []string
	for _, d := range strict.Details {
		fields = append(fields, d.Field)
	}
	slices.Sort(fields)
	if want := []string{"client_version", "plugin_info.cmd", "plugin_info.job_resources_lifetime", "plugin_info.monitor_info.expected_time", "plugin_info.monitor_info.note"}; !slices.Equal(fields, want) {
		t.Errorf("Pace's own route refused %v, want %v", fields, want)
	}

	r = e.do("POST", asp("/submissions"), "alice-token", doc)
	if r.code != http.StatusAccepted {
		t.Fatalf("Asperathos route = %d %s, want 202", r.code, r.body)
	}
	var out struct {
		JobID string `json:"job_id"`
	}
	r.json(t, &out)
	rec, err := e.c.Jobs().Status(t.Context(), out.JobID)
	if err != nil {
		t.Fatal(err)
	}
	s := rec.Spec
	if s.Replicas != (schemas.Replicas{Min: 2, Max: 2, Initial: 2}) || s.ResourcesLifetime.D() != 120*time.Second ||
		s.Deadline.After.D() != 90*time.Second || len(s.Worker.Command) != 0 {
		t.Errorf("spec = replicas %+v, lifetime %s, deadline %s, command %q", s.Replicas, s.ResourcesLifetime.D(), s.Deadline.After.D(), s.Worker.Command)
	}
	var log struct{ Execution, Stdout, Stderr string } // Asperathos' log: Pace's own lines are its execution
	e.do("GET", asp("/submissions/"+out.JobID+"/log"), "alice-token", "").json(t, &log)
	var warnings []string
	for l := range strings.Lines(log.Execution) {
		if _, w, ok := strings.Cut(l, " warning: "); ok {
			warnings = append(warnings, w)
		}
	}
	for _, want := range []string{"client_version: unknown field", "plugin_info.monitor_info.note: unknown field",
		"expected_time: 89.6 rounded to 90", "init_size 1 is below control_parameters.min_rep: raised to 2",
		"cmd is empty", "runs unscaled at 2 replicas"} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("the job's log warns %q, want a warning with %q", warnings, want)
		}
	}

	var list map[string]map[string]any
	e.do("GET", asp("/submissions"), "alice-token", "").json(t, &list)
	if _, ok := list[out.JobID]["spec"]; !ok {
		t.Errorf("the Asperathos job list lacks the detailed fields: %v", list[out.JobID])
	}
	e.do("GET", "/submissions", "alice-token", "").json(t, &list)
	if _, ok := list[out.JobID]["spec"]; ok {
		t.Errorf("Pace's job list has the detailed fields")
	}
	var vis map[string]string
	e.do("GET", asp("/visualizing/"+out.JobID), "alice-token", "").json(t, &vis)
	if vis["url"] != "URL not generated!" {
		t.Errorf("visualizing = %v", vis)
	}
	var errs any
	if r := e.do("GET", asp("/submissions/"+out.JobID+"/errors"), "alice-token", ""); json.Unmarshal(r.body, &errs) != nil || r.code != 200 {
		t.Errorf("errors = %d %s, want 200 {}", r.code, r.body)
	}
}
