package manager_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// TestAsperathosComponentRoutes drives the routes of Asperathos' monitor,
// controller and visualizer, its key and plugin routes, and the reads of a
// caller without credentials, under the compatibility prefix: each answer's
// status and body, for the caller's running and ended jobs and another
// tenant's.
func TestAsperathosComponentRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.submit("alice-token", `{"mode":"streaming"}`)
	done := e.submit("alice-token", `{"mode":"streaming"}`)
	if r := e.do("PUT", "/submissions/"+done+"/terminate", "alice-token", ""); r.code != http.StatusNoContent {
		t.Fatalf("terminate = %d %s", r.code, r.body)
	}
	const (
		monitor    = `{"plugin":"kubejobs","plugin_info":{"img":"x","init_size":1},"collect_period":1}`
		visualizer = `{"plugin":"kubejobs","enable_visualizer":true,"visualizer_plugin":"k8s-grafana","datasource_type":"influxdb","username":"u","password":"p"}`
		visStop    = `{"plugin":"kubejobs","visualizer_plugin":"k8s-grafana","datasource_type":"influxdb"}`
	)
	for _, s := range []struct {
		name, method, path, token, body string
		want                            int
		body1                           string // the answer's body, trimmed; "" for any
		contains, absent                string
	}{
		{"monitor start", "POST", asp("/monitoring/" + run), "alice-token", monitor, 202, `{}`, "", ""},
		{"monitor start without fields", "POST", asp("/monitoring/" + run), "alice-token", "", 400, "", `"field":"plugin_info"`, ""},
		{"monitor start of another plugin", "POST", asp("/monitoring/" + run), "alice-token", `{"plugin":"kubejobs_cost","plugin_info":{}}`, 409, "", "monitored by kubejobs", ""},
		{"monitor start of an unknown plugin", "POST", asp("/monitoring/" + run), "alice-token", `{"plugin":"nope","plugin_info":{}}`, 400, "", `"field":"plugin"`, ""},
		{"monitor start of another's job", "POST", asp("/monitoring/" + run), "bob-token", monitor, 400, "", "not found", ""},
		{"monitor start without credentials", "POST", asp("/monitoring/" + run), "", monitor, 401, "", "", ""},
		{"monitor start of an ended job", "POST", asp("/monitoring/" + done), "alice-token", monitor, 409, "", "already terminated", ""},
		{"monitor stop of a running job", "PUT", asp("/monitoring/" + run + "/stop"), "alice-token", "", 409, "", "/submissions/" + run + "/stop", ""},
		{"monitor stop of an ended job", "PUT", asp("/monitoring/" + done + "/stop"), "alice-token", "", 204, "", "", ""},
		{"monitor stop of another's job", "PUT", asp("/monitoring/" + done + "/stop"), "bob-token", "", 400, "", "", ""},
		{"setup", "POST", asp("/setup"), "alice-token", `{"actuator_plugin":"k8s_replicas","instances_cap":3}`, 501, "", "replicas.max", ""},
		{"scaling start", "POST", asp("/scaling/" + run), "alice-token", `{"control_plugin":"kubejobs","control_parameters":{"schedule_strategy":"deadline","min_rep":1},"redis_ip":"10.0.0.1"}`, 204, "", "", ""},
		{"scaling start, no strategy", "POST", asp("/scaling/" + run), "alice-token", `{"control_plugin":"kubejobs","control_parameters":{}}`, 204, "", "", ""},
		{"scaling start of another strategy", "POST", asp("/scaling/" + run), "alice-token", `{"control_plugin":"kubejobs","control_parameters":{"schedule_strategy":"pid"}}`, 409, "", "controller deadline", ""},
		{"scaling start without parameters", "POST", asp("/scaling/" + run), "alice-token", `{"control_plugin":"kubejobs"}`, 400, "", `"field":"control_parameters"`, ""},
		{"scaling start of an ended job", "POST", asp("/scaling/" + done), "alice-token", `{"control_plugin":"kubejobs","control_parameters":{}}`, 409, "", "", ""},
		{"scaling stop of a running job", "PUT", asp("/scaling/" + run + "/stop"), "alice-token", "", 409, "", "", ""},
		{"scaling stop of an ended job", "PUT", asp("/scaling/" + done + "/stop"), "alice-token", "", 204, "", "", ""},
		{"scaling status", "GET", asp("/scaling"), "alice-token", "", 200, `"Status: OK\nMonitoring applications:\n` + run + `\nLast action:none yet\n"`, "", ""},
		{"scaling status of another tenant", "GET", asp("/scaling"), "bob-token", "", 200, `"Status: OK\nMonitoring applications:\n"`, "", ""},
		{"visualizer start", "POST", asp("/visualizing/" + run), "alice-token", visualizer, 202, `{}`, "", ""},
		{"visualizer start without fields", "POST", asp("/visualizing/" + run), "alice-token", `{"plugin":"kubejobs"}`, 400, "", `"field":"visualizer_plugin"`, ""},
		{"visualizer start of another plugin", "POST", asp("/visualizing/" + run), "alice-token", strings.Replace(visualizer, "k8s-grafana", "x", 1), 400, "", `"field":"visualizer_plugin"`, ""},
		{"visualizer start without id", "POST", asp("/visualizing"), "alice-token", visualizer, 400, "", "/visualizing/{app_id}", ""},
		{"visualizer stop", "PUT", asp("/visualizing/" + run + "/stop"), "alice-token", visStop, 204, "", "", ""},
		{"visualizer stop of another's job", "PUT", asp("/visualizing/" + run + "/stop"), "bob-token", visStop, 400, "", "", ""},
		{"visualizer url", "GET", asp("/visualizing/" + run), "alice-token", "", 200, `{"url":"URL not generated!"}`, "", ""},
		{"visualizer url without credentials", "GET", asp("/visualizing/" + run), "", "", 401, "", "bearer token", ""},
		{"job without credentials", "GET", asp("/submissions/" + run), "", "", 401, "", "bearer token", ""},
		{"unknown job without credentials", "GET", asp("/submissions/kj-nope"), "", "", 401, "", "bearer token", ""},
		{"log without credentials", "GET", asp("/submissions/" + run + "/log"), "", "", 401, "", "", ""},
		{"errors without credentials", "GET", asp("/submissions/" + run + "/errors"), "", "", 401, "", "", ""},
		{"report without credentials", "GET", asp("/submissions/" + run + "/report"), "", "", 401, "", "", ""},
		{"another's job", "GET", asp("/submissions/" + run), "bob-token", "", 400, "", "", ""},
		{"Pace's own route without credentials", "GET", "/submissions/" + run, "", "", 404, "", "", ""},
		{"key", "GET", asp("/key"), "", "", 200, "", `"key":""`, ""},
		{"plugins", "GET", asp("/plugins"), "", "", 200, "",
			`{"name":"kubejobs","source":"builtin","plugin_source":"","module":"stages/collector","component":"monitor"}`, `"description"`},
		{"Pace's plugins", "GET", asp("/plugins"), "", "", 200, "",
			`{"name":"pid","source":"builtin","plugin_source":"","module":"stages/controller","component":"controller"}`, ""},
		{"plugin install refused", "POST", asp("/plugins"), "root-token", `{"plugin_name":"x","component":"monitor","install_source":"pip","plugin_source":"x"}`, 400, "",
			`"message":"Error installing plugin","error_code":400`, ""},
		{"plugin install of a mistyped body", "POST", asp("/plugins"), "root-token", `{"plugin_name":3}`, 400, "", `"message":"Error installing plugin"`, ""},
		{"plugin install by a tenant", "POST", asp("/plugins"), "alice-token", `{"plugin_name":"y","component":"controller"}`, 403, "", "", "Error installing"},
		{"plugin install", "POST", asp("/plugins"), "root-token", `{"plugin_name":"my-mpc","component":"controller","install_source":"git","plugin_source":"https://example.com/mpc"}`, 200, "", "", ""},
		{"installed plugin", "GET", asp("/plugins"), "", "", 200, "",
			`{"name":"my-mpc","source":"external","plugin_source":"https://example.com/mpc","module":"","component":"controller"}`, ""},
	} {
		t.Run(s.name, func(t *testing.T) {
			r := e.do(s.method, s.path, s.token, s.body)
			got := strings.TrimSpace(string(r.body))
			if r.code != s.want || s.body1 != "" && got != s.body1 || !strings.Contains(got, s.contains) ||
				s.absent != "" && strings.Contains(got, s.absent) {
				t.Errorf("%s %s = %d %s, want %d %s containing %q without %q", s.method, s.path, r.code, got, s.want, s.body1, s.contains, s.absent)
			}
			if r.code == http.StatusUnauthorized && r.hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// TestAsperathosLogShape reads a job's log under the compatibility prefix:
// Asperathos' three texts, Pace's lines in execution and its workers'
// output in stdout.
func TestAsperathosLogShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"mode":"streaming"}`)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := e.c.Outputs().PublishLog(t.Context(), &schemas.LogLine{Job: id, At: at, Source: "replica-1", Line: "hello"}); err != nil {
		t.Fatal(err)
	}
	var log map[string]any
	bustest.Eventually(t, 10*time.Second, "the worker's line in the log", func() bool {
		r := e.do("GET", asp("/submissions/"+id+"/log"), "alice-token", "")
		if r.code != http.StatusOK {
			t.Fatalf("log = %d %s", r.code, r.body)
		}
		log = nil
		r.json(t, &log)
		s, _ := log["stdout"].(string)
		return strings.Contains(s, "2026-01-02T03:04:05Z replica-1: hello\n")
	})
	if len(log) != 3 || log["stderr"] != "" {
		t.Errorf("log = %v, want execution, stdout and an empty stderr", log)
	}
	if x, _ := log["execution"].(string); !strings.Contains(x, "submitted") || strings.Contains(x, "hello") {
		t.Errorf("execution = %q, want the job's events and no worker output", x)
	}
	var lines []schemas.LogLine
	e.do("GET", "/submissions/"+id+"/log", "alice-token", "").json(t, &lines) // Pace's own route keeps its list
	if len(lines) < 2 {
		t.Errorf("Pace's log = %v, want the event and the worker's line", lines)
	}
}

// TestAsperathosCORS checks a preflight reflects what it asks for and
// that answers expose the headers a client needs.
func TestAsperathosCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, s := range []struct {
		name, method, headers  string
		wantMethods, wantHeads string
	}{
		{"asks for PUT with headers", "PUT", "authorization, content-type, x-trace", "PUT", "authorization, content-type, x-trace"},
		{"asks for nothing", "", "", "GET, POST, PUT, DELETE, OPTIONS", "Authorization, Content-Type"},
		{"asks for a method not served", "PATCH", "", "GET, POST, PUT, DELETE, OPTIONS", "Authorization, Content-Type"},
	} {
		t.Run(s.name, func(t *testing.T) {
			req, _ := http.NewRequest("OPTIONS", e.http.URL+asp("/submissions/x/stop"), nil)
			req.Header.Set("Origin", "https://ui.example")
			if s.method != "" {
				req.Header.Set("Access-Control-Request-Method", s.method)
			}
			if s.headers != "" {
				req.Header.Set("Access-Control-Request-Headers", s.headers)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			h := resp.Header
			if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" ||
				h.Get("Access-Control-Allow-Methods") != s.wantMethods || h.Get("Access-Control-Allow-Headers") != s.wantHeads {
				t.Errorf("preflight = %d %v, want methods %q, headers %q", resp.StatusCode, h, s.wantMethods, s.wantHeads)
			}
		})
	}
	r := e.do("GET", asp("/submissions/kj-nope"), "", "")
	for _, want := range []string{"Retry-After", "WWW-Authenticate", "X-Kubernetes-PF-PriorityLevel-UID"} {
		if got := r.hdr.Get("Access-Control-Expose-Headers"); !strings.Contains(got, want) {
			t.Errorf("Access-Control-Expose-Headers = %q, want %s", got, want)
		}
	}
}
