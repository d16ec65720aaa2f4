package manager_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pace-platform/pace/stages/manager"
)

// TestReplicasBeyondTheLocalCapAreRefused: a job the local actuator would
// run may not ask for more workers than it runs for one job; the refusal
// names the field, in Pace's paths and in Asperathos'. Jobs another
// actuator runs, and queue-only jobs, are not bound by it.
func TestReplicasBeyondTheLocalCapAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *manager.Config) { c.LocalMaxReplicas = 4 })
	for _, tc := range []struct {
		name, body string
		fields     []string // refused fields; none: accepted
	}{
		{"over the cap", `{"mode":"streaming","worker":{"exec":"cat"},"replicas":{"min":1,"max":1000000000,"initial":1000000000}}`,
			[]string{"spec.replicas.max", "spec.replicas.initial"}},
		{"at the cap", `{"mode":"streaming","worker":{"exec":"cat"},"replicas":{"min":4,"max":4}}`, nil},
		{"kubernetes runs it", `{"mode":"streaming","worker":{"image":"busybox"},"actuator":{"name":"kubernetes"},"replicas":{"max":100}}`, nil},
		{"queue only", `{"mode":"streaming","replicas":{"max":100}}`, nil},
		{"asperathos", asperathos(t, e.files.URL+"/five.txt", func(_, info map[string]any) { cp(info)["max_rep"] = 50 }),
			[]string{"plugin_info.control_parameters.max_rep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/submissions", "alice-token", tc.body)
			if len(tc.fields) == 0 {
				if r.code != http.StatusAccepted {
					t.Fatalf("submit = %d %s, want 202", r.code, r.body)
				}
				return
			}
			if r.code != http.StatusBadRequest {
				t.Fatalf("submit = %d %s, want 400", r.code, r.body)
			}
			got := map[string]bool{}
			for _, d := range r.apiError(t).Details {
				got[d.Field] = true
				if !strings.Contains(d.Detail, "at most 4") {
					t.Errorf("%s: %q does not say the cap", d.Field, d.Detail)
				}
			}
			for _, f := range tc.fields {
				if !got[f] {
					t.Errorf("no error on %s: %s", f, r.body)
				}
			}
		})
	}
}

// TestLocalExecDecidesWhoRunsCommandsOnTheHost: with --local-exec=admins a
// job the local actuator would run is refused, on its worker field, unless
// an admin submits it; with none it is refused for everyone. Queue-only
// jobs and jobs for Kubernetes are never refused by it.
func TestLocalExecDecidesWhoRunsCommandsOnTheHost(t *testing.T) {
	t.Parallel()
	const (
		local = `{"mode":"streaming","worker":{"exec":"cat"}}`
		queue = `{"mode":"streaming"}`
		kube  = `{"mode":"streaming","worker":{"image":"busybox"},"actuator":{"name":"kubernetes"}}`
	)
	for _, tc := range []struct {
		policy, token, body string
		refused             bool
	}{
		{manager.LocalExecAll, "alice-token", local, false},
		{manager.LocalExecAdmins, "alice-token", local, true},
		{manager.LocalExecAdmins, "root-token", local, false},
		{manager.LocalExecAdmins, "alice-token", queue, false},
		{manager.LocalExecNone, "root-token", local, true},
		{manager.LocalExecNone, "alice-token", kube, false},
	} {
		t.Run(tc.policy+"/"+tc.token+"/"+tc.body, func(t *testing.T) {
			e := newEnv(t, func(c *manager.Config) { c.LocalMaxReplicas, c.LocalExec = 4, tc.policy })
			r := e.do("POST", "/submissions", tc.token, tc.body)
			if !tc.refused {
				if r.code != http.StatusAccepted {
					t.Fatalf("submit = %d %s, want 202", r.code, r.body)
				}
				return
			}
			if r.code != http.StatusBadRequest {
				t.Fatalf("submit = %d %s, want 400", r.code, r.body)
			}
			if d := r.apiError(t).Details; len(d) != 1 || d[0].Field != "spec.worker" || !strings.Contains(d[0].Detail, "local-exec="+tc.policy) {
				t.Errorf("details = %+v, want one on spec.worker naming --local-exec=%s", d, tc.policy)
			}
		})
	}
}
