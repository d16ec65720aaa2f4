package manager_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

func TestClusterRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const kubeconfig = "apiVersion: v1\nkind: Config\nusers: [{name: secret-user}]\n"
	steps := []struct {
		method, path, token, body string
		want                      int
		contains                  string
	}{
		{"POST", "/submissions/cluster", "alice-token", `{"cluster_name":"lab","cluster_config":"x"}`, 403, ""},
		{"POST", "/submissions/cluster", "", `{"cluster_name":"lab","cluster_config":"x"}`, 401, ""},
		{"POST", "/submissions/cluster", "root-token", `{"cluster_name":"lab","cluster_config":` + jsonString(kubeconfig) + `,"enable_auth":false}`, 202, `"status":"success"`},
		{"POST", "/submissions/cluster", "root-token", `{"cluster_name":"lab","cluster_config":"x"}`, 409, ""},
		{"POST", "/submissions/cluster", "root-token", `{"cluster_name":"edge","cluster_config":"y"}`, 202, ""},
		{"GET", "/submissions/cluster/activate", "root-token", "", 404, "no cluster is active"},
		{"PUT", "/submissions/cluster/lab/activate", "root-token", `{"enable_auth":false}`, 200, `"status":"active"`},
		{"PUT", "/submissions/cluster/edge/activate", "root-token", "", 200, ""},
		{"GET", "/submissions/cluster/activate", "root-token", "", 200, `"edge"`},
		{"POST", "/submissions/cluster/lab/certificate", "root-token", `{"certificate_name":"ca","certificate_content":"PEM"}`, 202, `"certificate_name":"ca"`},
		{"GET", "/submissions/cluster", "root-token", "", 200, `"ca":"PEM"`},
		{"GET", "/submissions/cluster", "alice-token", "", 403, ""},
		{"DELETE", "/submissions/cluster/lab/certificate/ca", "root-token", "", 202, ""},
		{"DELETE", "/submissions/cluster/lab/certificate/ca", "root-token", "", 404, ""},
		{"DELETE", "/submissions/cluster/lab", "root-token", "", 204, ""},
		{"DELETE", "/submissions/cluster/lab", "root-token", "", 404, ""},
	}
	for _, s := range steps {
		r := e.do(s.method, s.path, s.token, s.body)
		if r.code != s.want || !strings.Contains(string(r.body), s.contains) {
			t.Errorf("%s %s as %q = %d %s, want %d containing %q", s.method, s.path, s.token, r.code, r.body, s.want, s.contains)
		}
		if s.token != "root-token" && strings.Contains(string(r.body), "secret-user") {
			t.Errorf("%s %s as %q leaked the kubeconfig", s.method, s.path, s.token)
		}
	}
	// A job selects a registered cluster, else the active one.
	if cl, _, err := e.c.ClusterFor(t.Context(), ""); err != nil || cl == nil || cl.Name != "edge" || cl.Config != "y" {
		t.Errorf("active cluster = %+v, %v; want edge", cl, err)
	}
	id := e.submit("alice-token", `{"mode":"streaming","actuator":{"name":"local","cluster":"edge"}}`)
	if rec, _ := e.c.Jobs().Status(t.Context(), id); rec.Spec.Actuator.Cluster != "edge" {
		t.Errorf("cluster = %q", rec.Spec.Actuator.Cluster)
	}
}

func TestPluginRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/plugins", "alice-token", "")
	for _, want := range []string{`"name":"default","component":"controller"`, `"name":"kubernetes","component":"actuator"`, `"name":"influxdb","component":"sink"`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("GET /plugins = %s, want %s", r.body, want)
		}
	}
	const doc = `{"mode":"streaming","controller":{"name":"my-mpc"}}`
	if r := e.do("POST", "/submissions", "alice-token", doc); r.code != http.StatusBadRequest {
		t.Fatalf("unregistered controller = %d", r.code)
	}
	if r := e.do("POST", "/plugins", "root-token", `{"plugin_name":"my-mpc","component":"controller","plugin_source":"https://example.com/mpc","install_source":"git"}`); r.code != http.StatusOK {
		t.Fatalf("register = %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/plugins", "root-token", `{"plugin_name":"x","component":"monitor"}`); r.code != http.StatusBadRequest {
		t.Errorf("non-controller plugin = %d, want 400", r.code)
	}
	e.submit("alice-token", doc)
	if r := e.do("GET", "/plugins", "", ""); !strings.Contains(string(r.body), `"name":"my-mpc","component":"controller","source":"external"`) {
		t.Errorf("GET /plugins = %s, want my-mpc", r.body)
	}
}

// TestBuiltinControllersAccepted submits a job naming each controller the
// controller stage has (schemas' list, which its registry holds exactly: the
// builtin package's test), so the API cannot refuse one the stage would run.
func TestBuiltinControllersAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	names := schemas.BuiltinControllers()
	if !slices.Contains(names, "hpa") {
		t.Fatalf("builtin controllers = %v, want hpa among them", names)
	}
	plugins := string(e.do("GET", "/plugins", "alice-token", "").body)
	for _, name := range names {
		e.submit("alice-token", `{"mode":"streaming","controller":{"name":"`+name+`"}}`)
		if want := `"name":"` + name + `","component":"controller","source":"builtin"`; !strings.Contains(plugins, want) {
			t.Errorf("GET /plugins = %s, want %s", plugins, want)
		}
	}
}

// TestOpenAPIAndDocsCoverEveryRoute keeps /openapi.json and docs/api.md in
// step with the routes the mux serves.
func TestOpenAPIAndDocsCoverEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := manager.NewAPI(e.m)
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	e.do("GET", "/openapi.json", "", "").json(t, &doc)
	docs, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, route := range api.Routes() {
		method, path, _ := strings.Cut(route, " ")
		if path != "/openapi.json" {
			n++
			if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
				t.Errorf("openapi.json lacks %s", route)
			}
		}
		if !strings.Contains(string(docs), "`"+route+"`") {
			t.Errorf("docs/api.md does not document `%s`", route)
		}
		if r := e.do(method, strings.NewReplacer("{id}", "nope", "{name}", "nope", "{cert}", "nope").Replace(path), "root-token", ""); r.code == http.StatusNotFound && strings.Contains(string(r.body), "404 page not found") {
			t.Errorf("%s is not served", route)
		}
	}
	ops := 0
	for _, item := range doc.Paths {
		ops += len(item)
	}
	if doc.OpenAPI == "" || ops != n {
		t.Errorf("openapi %q has %d operations, want %d", doc.OpenAPI, ops, n)
	}
}

func TestJSONSuffixRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", `{"mode":"streaming"}`)
	for _, path := range []string{"/submissions.json", "/submissions/" + id + ".json", "/submissions/" + id + "/report.json", "/plugins.json"} {
		if r := e.do("GET", path, "alice-token", ""); r.code != http.StatusOK {
			t.Errorf("GET %s = %d %s", path, r.code, r.body)
		}
	}
	if r := e.do("PUT", "/submissions/"+id+"/stop.json", "alice-token", ""); r.code != http.StatusNoContent {
		t.Errorf("PUT stop.json = %d %s", r.code, r.body)
	}
}

func jsonString(s string) string {
	return `"` + strings.NewReplacer("\n", `\n`, `"`, `\"`).Replace(s) + `"`
}
