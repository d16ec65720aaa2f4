package manager_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

// TestExamplesRunToCompletion submits the documents of examples/ and runs
// them with workers started here (the actuators come later): Asperathos'
// payloads 2 and 3 and Pace's own specs.
func TestExamplesRunToCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *manager.Config) { c.WorkloadDir = "../../examples/jobs" })
	files := httptest.NewServer(http.FileServer(http.Dir("../../examples/asperathos")))
	defer files.Close()
	tests := []struct {
		file, ct string
		items    int
	}{
		{"../../examples/asperathos/payload2-local.json", "application/json", 50},
		{"../../examples/asperathos/payload3-local.json", "application/json", 50},
		{"../../examples/jobs/shout.yaml", "application/yaml", 4},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			doc, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			body := strings.ReplaceAll(string(doc), "http://127.0.0.1:8000", files.URL)
			r := e.doCT("POST", "/submissions", "alice-token", body, tt.ct)
			if r.code != http.StatusAccepted {
				t.Fatalf("submit = %d %s", r.code, r.body)
			}
			var out struct {
				JobID string `json:"job_id"`
			}
			r.json(t, &out)
			e.work(out.JobID, 3, upper)
			e.waitState(out.JobID, schemas.Completed)
			if v := e.status("alice-token", out.JobID); v["done"] != float64(tt.items) {
				t.Errorf("done = %v, want %d", v["done"], tt.items)
			}
		})
	}
	for _, file := range []string{"../../examples/jobs/ingest.yaml", "../../examples/jobs/deadline-at.json"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		body := strings.ReplaceAll(string(doc), "https://example.com/nightly/items.txt", files.URL+"/workload.txt")
		ct := "application/json"
		if strings.HasSuffix(file, ".yaml") {
			ct = "application/yaml"
		}
		if r := e.doCT("POST", "/submissions", "alice-token", body, ct); r.code != http.StatusAccepted {
			t.Errorf("%s = %d %s", file, r.code, r.body)
		}
	}
}
