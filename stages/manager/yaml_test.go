package manager_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/schemas"
)

// yamlItems are items YAML 1.1 would read as booleans, numbers or null.
const yamlItems = `[x, yes, no, on, off, y, 010, 1.0, null, "~", 0x1F]`

// wantItems are yamlItems as written.
var wantItems = []string{"x", "yes", "no", "on", "off", "y", "010", "1.0", "null", "~", "0x1F"}

// yamlSpec is a Pace spec whose strings look like other types.
const yamlSpec = `name: no
mode: batch
deadline: 1m
workload: {items: ` + yamlItems + `}
worker:
  command: [run, yes, 010]
  env: {A: yes, B: 010, C: off, D: 1.0}
labels: {team: on, build: 0x1F}
replicas: {min: 1, max: 010}
max_deliveries: 0o3
`

// yamlAsperathos is an Asperathos submission in YAML with such strings.
func yamlAsperathos(workload string) string {
	return `plugin: kubejobs
enable_auth: false
plugin_info:
  cmd: [run, yes, 010]
  img: busybox
  init_size: 1
  redis_workload: ` + workload + `
  env_vars: {A: yes, B: 010}
  control_plugin: kubejobs
  control_parameters: {schedule_strategy: default, min_rep: 1, max_rep: 010}
  monitor_plugin: kubejobs
  monitor_info: {expected_time: 060}
`
}

// submitters send a YAML document over HTTP or NATS and return the job id
// or the refusal.
var submitters = []struct {
	name   string
	submit func(e *env, doc string) (string, *schemas.APIError)
}{
	{"HTTP", func(e *env, doc string) (string, *schemas.APIError) {
		r := e.doCT("POST", "/submissions", "alice-token", doc, "application/yaml")
		if r.code != http.StatusAccepted {
			apiErr := r.apiError(e.t)
			return "", &apiErr
		}
		var out struct {
			JobID string `json:"job_id"`
		}
		r.json(e.t, &out)
		return out.JobID, nil
	}},
	{"NATS", func(e *env, doc string) (string, *schemas.APIError) {
		id, err := e.c.Jobs().Submit(context.Background(), []byte(doc), bus.WithToken("alice-token"), bus.WithContentType("application/yaml"))
		var apiErr *schemas.APIError
		if asAPIError(err, &apiErr) {
			return "", apiErr
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return id, nil
	}},
}

// TestYAMLStringsAsWritten submits YAML whose strings YAML 1.1 would read
// as other types, and checks that the job holds them as written while
// numbers are read by YAML 1.2 (010 is ten).
func TestYAMLStringsAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	defer func(parent *testing.T) { e.t = parent }(t) // the subtests borrow e
	for _, s := range submitters {
		t.Run(s.name, func(t *testing.T) {
			e.t = t
			id, apiErr := s.submit(e, yamlSpec)
			if apiErr != nil {
				t.Fatalf("submit = %v, want accepted", apiErr)
			}
			rec, err := e.c.Jobs().Status(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			got := rec.Spec
			want := struct {
				Name          string
				Command       []string
				Env, Labels   map[string]string
				Max           int
				MaxDeliveries int
			}{"no", []string{"run", "yes", "010"}, map[string]string{"A": "yes", "B": "010", "C": "off", "D": "1.0"},
				map[string]string{"team": "on", "build": "0x1F"}, 10, 3}
			if diff := cmp.Diff(want, struct {
				Name          string
				Command       []string
				Env, Labels   map[string]string
				Max           int
				MaxDeliveries int
			}{got.Name, got.Worker.Command, got.Worker.Env, got.Labels, got.Replicas.Max, got.MaxDeliveries}); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if items := e.items(id); !slices.Equal(items, wantItems) {
				t.Errorf("items = %q, want %q", items, wantItems)
			}
		})
	}
}

// TestYAMLAsperathosStringsAsWritten does the same with an Asperathos
// submission, whose strings go through the same conversion.
func TestYAMLAsperathosStringsAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	defer func(parent *testing.T) { e.t = parent }(t) // the subtests borrow e
	for _, s := range submitters {
		t.Run(s.name, func(t *testing.T) {
			e.t = t
			id, apiErr := s.submit(e, yamlAsperathos(e.files.URL+"/three.txt"))
			if apiErr != nil {
				t.Fatalf("submit = %v, want accepted", apiErr)
			}
			rec, err := e.c.Jobs().Status(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			s := rec.Spec
			if !slices.Equal(s.Worker.Command, []string{"run", "yes", "010"}) || s.Worker.Env["A"] != "yes" ||
				s.Worker.Env["B"] != "010" || s.Replicas.Max != 10 || s.Deadline.After.D().Seconds() != 60 {
				t.Errorf("spec = command %q, env %q, max %d, deadline %v; want strings as written, max 10, deadline 60s",
					s.Worker.Command, s.Worker.Env, s.Replicas.Max, s.Deadline)
			}
		})
	}
}

// TestYAMLCollectionWhereStringBelongs checks that a mapping or list where
// a string belongs is refused at its path, with how to quote it.
func TestYAMLCollectionWhereStringBelongs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, doc, field, detail string
	}{
		{"mapping item", "mode: batch\ndeadline: 1m\nworkload: {items: [x, a: b]}\n",
			"spec.workload.items[1]", `must be a string: put it in quotes, e.g. "a: b"`},
		{"block mapping item", "mode: batch\ndeadline: 1m\nworkload:\n  items:\n    - x\n    - key: value\n",
			"spec.workload.items[1]", `must be a string: put it in quotes, e.g. "key: value"`},
		{"list env value", "mode: streaming\nworker: {env: {A: [1, 2]}}\n",
			"spec.worker.env[A]", `must be a string: put it in quotes, e.g. "[1, 2]"`},
		{"asperathos mapping in cmd", strings.Replace(yamlAsperathos(e.files.URL+"/three.txt"), "cmd: [run, yes, 010]", "cmd: [run, a: b]", 1),
			"plugin_info.cmd[1]", `must be a string: put it in quotes, e.g. "a: b"`},
	}
	defer func(parent *testing.T) { e.t = parent }(t) // the subtests borrow e
	for _, s := range submitters {
		for _, tt := range tests {
			t.Run(s.name+"/"+tt.name, func(t *testing.T) {
				e.t = t
				id, apiErr := s.submit(e, tt.doc)
				if apiErr == nil {
					t.Fatalf("submit = job %s, want refused", id)
				}
				if apiErr.Code != http.StatusBadRequest || len(apiErr.Details) != 1 ||
					apiErr.Details[0].Field != tt.field || !strings.Contains(apiErr.Details[0].Detail, tt.detail) {
					t.Errorf("refusal = %d %+v, want 400 at %s only, saying %s", apiErr.Code, apiErr.Details, tt.field, tt.detail)
				}
			})
		}
	}
	if jobs, err := e.c.Jobs().List(context.Background()); err != nil || len(jobs) != 0 {
		t.Errorf("jobs = %d (%v), want none", len(jobs), err)
	}
}

// items runs a worker on job until it completes and returns its items'
// payloads in queue order.
func (e *env) items(job string) []string {
	e.t.Helper()
	var mu sync.Mutex
	got := map[string]string{} // by item id, which follows the order
	e.work(job, 1, func(_ context.Context, it *schemas.WorkItem) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		got[it.ID] = it.Payload
		return "", nil
	})
	e.waitState(job, schemas.Completed)
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, id := range slices.Sorted(maps.Keys(got)) {
		out = append(out, got[id])
	}
	return out
}
