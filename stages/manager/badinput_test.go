package manager_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/stages/manager"
)

// payload2 is Asperathos' integration-test payload 2 (reference §2.7).
const payload2 = `{
  "plugin": "kubejobs",
  "plugin_info": {
    "username": "admin",
    "password": "grafana123123",
    "cmd": ["/bin/bash", "wrapper.sh"],
    "img": "registry-git.lsd.ufcg.edu.br/asperathos/asperathos-docker-images/ci:batch-base",
    "init_size": 1,
    "redis_workload": "https://git.lsd.ufcg.edu.br/snippets/133/raw",
    "config_id": "asd",
    "control_plugin": "kubejobs",
    "job_resources_lifetime": 120,
    "control_parameters": {
      "schedule_strategy": "default",
      "max_size": 10,
      "actuator": "k8s_replicas",
      "check_interval": 1,
      "trigger_down": 1,
      "trigger_up": 1,
      "min_rep": 1,
      "max_rep": 10,
      "actuation_size": 1,
      "metric_source": "redis"
    },
    "monitor_plugin": "kubejobs",
    "monitor_info": { "expected_time": 1 },
    "enable_visualizer": true,
    "visualizer_plugin": "k8s-grafana",
    "visualizer_info": { "datasource_type": "influxdb" },
    "env_vars": {},
    "secrets": ["gitlablsdtoken"]
  },
  "enable_auth": false
}`

// asperathos returns payload 2 with its workload at url, changed by edit.
func asperathos(t *testing.T, url string, edit func(doc, info map[string]any)) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(payload2), &doc); err != nil {
		t.Fatal(err)
	}
	info := doc["plugin_info"].(map[string]any)
	info["redis_workload"] = url
	if edit != nil {
		edit(doc, info)
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func cp(info map[string]any) map[string]any { return info["control_parameters"].(map[string]any) }

func TestBadSubmissionsAreRefusedWithEveryFieldAndLeaveNoTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *manager.Config) { c.WorkloadTimeout = 300 * time.Millisecond })
	files := e.files.URL
	native := func(fields string) string {
		return `{"name":"sq","mode":"batch","deadline":"1m","workload":{"items":["1","2"]}` + fields + `}`
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name   string
		token  string
		ct     string
		body   string
		code   int
		fields []string // reported field paths (all of them, in any order)
	}{
		{"invalid JSON", "alice-token", "", `{"mode":`, 400, []string{"body"}},
		{"not an object", "alice-token", "", `[1, 2]`, 400, []string{"body"}},
		{"null document", "alice-token", "", `null`, 400, []string{"body"}},
		{"empty YAML document", "alice-token", "application/yaml", "# nothing\n", 400, []string{"body"}},
		{"unknown field", "alice-token", "", native(`,"bogus":1`), 400, []string{"spec.bogus"}},
		{"mistyped mode", "alice-token", "", `{"mode":5,"deadline":"1m","workload":{"items":["a"]}}`, 400, []string{"spec.mode"}},
		{"unknown mode", "alice-token", "", `{"mode":"cron","deadline":"1m"}`, 400, []string{"spec.mode"}},
		{"batch without deadline", "alice-token", "", `{"mode":"batch","workload":{"items":["a"]}}`, 400, []string{"spec.deadline"}},
		{"deadline in the past", "alice-token", "", `{"mode":"batch","deadline":"` + past + `","workload":{"items":["a"]}}`, 400, []string{"spec.deadline"}},
		{"deadline not a time at once", "alice-token", "", `{"mode":"batch","deadline":"soon","workload":{"items":["a"]}}`, 400, []string{"spec.deadline"}},
		{"negative deadline", "alice-token", "", `{"mode":"batch","deadline":"-5s","workload":{"items":["a"]}}`, 400, []string{"spec.deadline"}},
		{"negative replicas", "alice-token", "", native(`,"replicas":{"min":-1,"max":2}`), 400, []string{"spec.replicas.min"}},
		{"min above max", "alice-token", "", native(`,"replicas":{"min":3,"max":2,"initial":2}`), 400, []string{"spec.replicas.max", "spec.replicas.initial"}},
		{"initial above max", "alice-token", "", native(`,"replicas":{"min":1,"max":2,"initial":5}`), 400, []string{"spec.replicas.initial"}},
		{"mistyped replicas", "alice-token", "", native(`,"replicas":{"max":"3"}`), 400, []string{"spec.replicas.max"}},
		{"fractional replicas", "alice-token", "", native(`,"replicas":{"max":2.5}`), 400, []string{"spec.replicas.max"}},
		{"unknown controller", "alice-token", "", native(`,"controller":{"name":"magic"}`), 400, []string{"spec.controller.name"}},
		{"unknown actuator", "alice-token", "", native(`,"actuator":{"name":"nomad"}`), 400, []string{"spec.actuator.name"}},
		{"unknown cluster", "alice-token", "", native(`,"actuator":{"name":"local","cluster":"mars"}`), 400, []string{"spec.actuator.cluster"}},
		{"kubernetes without image", "alice-token", "", native(`,"actuator":{"name":"kubernetes"}`), 400, []string{"spec.worker.image"}},
		{"host device without privileged", "alice-token", "", native(`,"worker":{"image":"i","security":{"host_devices":["/dev/isgx"]}}`), 400, []string{"spec.worker.security.host_devices"}},
		{"host device outside /dev", "alice-token", "", native(`,"worker":{"image":"i","security":{"privileged":true,"host_devices":["/etc/shadow"]}}`), 400, []string{"spec.worker.security.host_devices[0]", "spec.worker.security.privileged"}},
		{"privileged workers not allowed here", "alice-token", "", native(`,"worker":{"image":"i","security":{"privileged":true}}`), 400, []string{"spec.worker.security.privileged"}},
		{"target of an unknown kind", "alice-token", "", native(`,"actuator":{"name":"kubernetes","target":{"kind":"Pod","name":"web"}}`), 400, []string{"spec.actuator.target.kind"}},
		{"target with a worker", "alice-token", "", native(`,"worker":{"image":"i"},"actuator":{"name":"kubernetes","target":{"kind":"Deployment","name":"Web_1"}}`), 400, []string{"spec.actuator.target.name", "spec.worker"}},
		{"target without kubernetes", "alice-token", "", native(`,"actuator":{"name":"local","target":{"kind":"StatefulSet","name":"db"}}`), 400, []string{"spec.actuator.target"}},
		{"tiny item timeout", "alice-token", "", native(`,"item_timeout":"10ms"`), 400, []string{"spec.item_timeout"}},
		{"negative max deliveries", "alice-token", "", native(`,"max_deliveries":-1`), 400, []string{"spec.max_deliveries"}},
		// Durations that are not zero yet round to 0 were read as 0, which means "default" (30s).
		{"item timeout below 1ns", "alice-token", "", native(`,"item_timeout":1e-10`), 400, []string{"spec.item_timeout"}},
		{"item timeout string below 1ns", "alice-token", "application/yaml", "mode: batch\ndeadline: 1m\nworkload: {items: [a]}\nitem_timeout: 0.5ns\n", 400, []string{"spec.item_timeout"}},
		{"YAML item timeout below 1ns", "alice-token", "application/yaml", "mode: batch\ndeadline: 1m\nworkload: {items: [a]}\nitem_timeout: 1e-10\n", 400, []string{"spec.item_timeout"}},
		{"deadline below 1ns", "alice-token", "", `{"mode":"batch","deadline":1e-10,"workload":{"items":["a"]}}`, 400, []string{"spec.deadline"}},
		{"zero time deadline", "alice-token", "", `{"mode":"batch","deadline":"0001-01-01T00:00:00Z","workload":{"items":["a"]}}`, 400, []string{"spec.deadline"}},
		{"every duration wrong at once", "alice-token", "", `{"mode":"batch","deadline":1e-10,"workload":{"items":["a"]},"item_timeout":"25h",` +
			`"resources_lifetime":"-1s","controller":{"check_interval":1e-12},"worker":{"termination_grace":"48h"}}`, 400,
			[]string{"spec.deadline", "spec.item_timeout", "spec.resources_lifetime", "spec.controller.check_interval", "spec.worker.termination_grace"}},
		{"two workload sources", "alice-token", "", `{"mode":"batch","deadline":"1m","workload":{"items":["a"],"url":"` + files + `/three.txt"}}`, 400, []string{"spec.workload"}},
		{"streaming with items", "alice-token", "", `{"mode":"streaming","workload":{"items":["a"]}}`, 400, []string{"spec.workload"}},
		{"batch without workload", "alice-token", "", `{"mode":"batch","deadline":"1m"}`, 400, []string{"spec.workload"}},
		{"blank inline items", "alice-token", "", `{"mode":"batch","deadline":"1m","workload":{"items":[" ",""]}}`, 400, []string{"spec.workload.items"}},
		{"url unreachable", "alice-token", "", `{"deadline":"1m","workload":{"url":"http://127.0.0.1:1/x"}}`, 400, []string{"spec.workload.url"}},
		{"url too large", "alice-token", "", `{"deadline":"1m","workload":{"url":"` + files + `/big.txt"}}`, 400, []string{"spec.workload.url"}},
		{"url not text", "alice-token", "", `{"deadline":"1m","workload":{"url":"` + files + `/image.png"}}`, 400, []string{"spec.workload.url"}},
		{"url binary", "alice-token", "", `{"deadline":"1m","workload":{"url":"` + files + `/binary"}}`, 400, []string{"spec.workload"}},
		{"url without items", "alice-token", "", `{"deadline":"1m","workload":{"url":"` + files + `/empty.txt"}}`, 400, []string{"spec.workload"}},
		{"url not found", "alice-token", "", `{"deadline":"1m","workload":{"url":"` + files + `/nope.txt"}}`, 400, []string{"spec.workload.url"}},
		{"url too slow", "alice-token", "", `{"deadline":"1m","workload":{"url":"` + files + `/slow.txt"}}`, 400, []string{"spec.workload.url"}},
		{"ftp url", "alice-token", "", `{"deadline":"1m","workload":{"url":"ftp://example.com/x"}}`, 400, []string{"spec.workload.url"}},
		{"file workload refused", "alice-token", "", `{"deadline":"1m","workload":{"file":"items.txt"}}`, 400, []string{"spec.workload.file"}},
		{"owner of another user", "alice-token", "", native(`,"owner":"bob"`), 400, []string{"spec.owner"}},
		{"unknown and invalid fields at once", "alice-token", "", `{"mode":"batch","deadline":"1m","replicas":{"min":-1,"max":"2"},"actuator":{"name":"x"},"extra":true,"workload":{"items":["a"]}}`, 400,
			[]string{"spec.extra", "spec.replicas.max", "spec.replicas.min", "spec.actuator.name"}},
		{"every field error at once", "alice-token", "", `{"mode":"batch","deadline":"-1s","replicas":{"min":-1,"max":1},"actuator":{"name":"x"},"max_deliveries":-2}`, 400,
			[]string{"spec.workload", "spec.deadline", "spec.max_deliveries", "spec.replicas.min", "spec.actuator.name"}},
		{"invalid YAML", "alice-token", "application/yaml", "mode: [batch\n", 400, []string{"body"}},
		{"YAML unknown field", "alice-token", "application/yaml", "mode: batch\ndeadline: 1m\nworkload: {items: [a]}\ncolour: red\n", 400, []string{"spec.colour"}},
		{"wrong content type", "alice-token", "text/plain", native(""), 415, nil},
		{"oversized body", "alice-token", "", `{"name":"` + strings.Repeat("x", 1<<16) + `"}`, 413, nil},
		{"no credentials", "", "", native(""), 401, nil},
		{"bad token", "nobody-token", "", native(""), 401, nil},
		{"asperathos without plugin_info", "alice-token", "", `{"plugin":"kubejobs","enable_auth":false}`, 400, []string{"plugin_info"}},
		{"asperathos unknown plugin", "alice-token", "", asperathos(t, files+"/three.txt", func(d, _ map[string]any) { d["plugin"] = "spark" }), 400, []string{"plugin"}},
		{"asperathos init_size 0", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { i["init_size"] = 0 }), 400, []string{"plugin_info.init_size"}},
		{"asperathos missing cmd and img", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { delete(i, "cmd"); delete(i, "img") }), 400,
			[]string{"plugin_info.cmd", "plugin_info.img"}},
		{"asperathos unknown control plugin", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { i["control_plugin"] = "magic" }), 400, []string{"plugin_info.control_plugin"}},
		{"asperathos min_rep above max_rep", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { cp(i)["min_rep"] = 5; cp(i)["max_rep"] = 2 }), 400,
			[]string{"plugin_info.control_parameters.max_rep"}},
		{"asperathos float expected_time", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { i["monitor_info"] = map[string]any{"expected_time": 1.5} }), 400,
			[]string{"plugin_info.monitor_info.expected_time"}},
		{"asperathos expected_time below 1s", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { i["monitor_info"] = map[string]any{"expected_time": 1e-10} }), 400,
			[]string{"plugin_info.monitor_info.expected_time"}},
		{"asperathos durations wrong at once", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) {
			i["monitor_info"] = map[string]any{"expected_time": 1e-10}
			cp(i)["check_interval"] = 1e-10
			i["job_resources_lifetime"] = 1e-10
			i["termination_grace_period_seconds"] = 100000
		}), 400, []string{"plugin_info.monitor_info.expected_time", "plugin_info.control_parameters.check_interval",
			"plugin_info.job_resources_lifetime", "plugin_info.termination_grace_period_seconds"}},
		{"asperathos unknown field", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { i["bogus"] = true }), 400, []string{"plugin_info.bogus"}},
		{"asperathos unknown strategy", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { cp(i)["schedule_strategy"] = "magic" }), 400,
			[]string{"plugin_info.control_parameters.schedule_strategy"}},
		{"asperathos pid without gains", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { cp(i)["schedule_strategy"] = "pid" }), 400,
			[]string{"plugin_info.control_parameters.heuristic_options"}},
		{"asperathos workload unreachable", "alice-token", "", asperathos(t, "http://127.0.0.1:1/w", nil), 400, []string{"plugin_info.redis_workload"}},
		{"asperathos visualizer without info", "alice-token", "", asperathos(t, files+"/three.txt", func(_, i map[string]any) { delete(i, "visualizer_info") }), 400,
			[]string{"plugin_info.visualizer_info"}},
		{"asperathos wrong password", "", "", asperathos(t, files+"/three.txt", func(d, _ map[string]any) {
			d["enable_auth"], d["username"], d["password"] = true, "alice", "wrong"
		}), 401, nil},
	}
	if len(tests) < 30 {
		t.Fatalf("only %d cases", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.doCT("POST", "/submissions", tt.token, tt.body, tt.ct)
			if r.code != tt.code {
				t.Fatalf("code = %d, want %d; body %s", r.code, tt.code, r.body)
			}
			apiErr := r.apiError(t)
			if apiErr.Code != tt.code || apiErr.Name == "" || apiErr.Message == "" {
				t.Errorf("envelope = %+v, want error_code %d with a name and a message", apiErr, tt.code)
			}
			var got []string
			for _, d := range apiErr.Details {
				got = append(got, d.Field)
			}
			for _, f := range tt.fields {
				if !slices.Contains(got, f) {
					t.Errorf("fields = %v, want %s among them", got, f)
				}
			}
			if tt.fields != nil && len(got) != len(tt.fields) && strings.Contains(tt.name, "at once") {
				t.Errorf("fields = %v, want exactly %v", got, tt.fields)
			}
		})
	}

	// Nothing reached the bus: no record, event, item or log line.
	ctx := context.Background()
	jobs, err := e.c.Jobs().List(ctx)
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs = %d (%v), want none", len(jobs), err)
	}
	for _, stream := range []string{"PACE_JOBS", "PACE_WORK", "PACE_LOGS"} {
		st, err := e.c.JetStream().Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("%s holds %d messages after refused submissions, want 0", stream, n)
		}
	}
	if r := e.do("GET", "/submissions", "root-token", ""); r.code != http.StatusOK || string(r.body) != "{}\n" {
		t.Errorf("GET /submissions = %d %s, want an empty object", r.code, r.body)
	}
}

// A mistyped field name is refused with the closest known name; a name
// close to none gets no guess.
func TestUnknownFieldsSuggestTheClosestName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/submissions", "alice-token", `{"mode":"batch","dedline":"1m","workload":{"items":["a"]},"worker":{"exec":"cat","timout":"2s"},"zzzzzz":1}`)
	want := map[string]string{"spec.dedline": `did you mean "deadline"?`, "spec.worker.timout": `did you mean "timeout"?`, "spec.zzzzzz": ""}
	got := map[string]string{}
	for _, d := range r.apiError(t).Details {
		got[d.Field] = d.Detail
	}
	for f, hint := range want {
		detail, ok := got[f]
		switch {
		case !ok:
			t.Errorf("no detail on %s: %v", f, got)
		case hint == "" && strings.Contains(detail, "did you mean"):
			t.Errorf("%s: %q, want no guess", f, detail)
		case !strings.Contains(detail, hint):
			t.Errorf("%s: %q, want %s", f, detail, hint)
		}
	}
}
