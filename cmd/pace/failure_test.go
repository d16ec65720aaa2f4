package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/schemas"
)

// A job whose local workers cannot start, or exit before its first result,
// is failed by its failure policy (before_first_result, 3 exits), with the
// cause and the workers' last lines in its reason, and its log.
func TestBrokenWorkersFailTheirJob(t *testing.T) {
	t.Parallel()
	u := startUp(t, filepath.Join(t.TempDir(), "data"))
	u.env = []string{"PACE_API=" + u.httpURL}
	c := u.client(t)
	ctx := context.Background()
	submit := func(doc string) string {
		t.Helper()
		resp, err := http.Post(u.httpURL+"/submissions", "application/json", strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			JobID string `json:"job_id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit = %d %v", resp.StatusCode, err)
		}
		return v.JobID
	}
	missing := submit(`{"mode":"streaming","worker":{"command":["/nonexistent/worker"]}}`)
	crashing := submit(`{"mode":"streaming","worker":{"command":["sh","-c","echo cannot reach the data >&2; exit 3"]}}`)
	for id, want := range map[string][]string{
		missing:  {"before_first_result", "exited 3 times", "did not start", "/nonexistent/worker"},
		crashing: {"before_first_result", "exit status 3", "cannot reach the data"},
	} {
		var rec *schemas.JobRecord
		bustest.Eventually(t, time.Minute, id+" failed", func() bool {
			var err error
			rec, err = c.Jobs().Status(ctx, id)
			return err == nil && rec.State == schemas.Failed
		})
		for _, w := range want {
			if !strings.Contains(rec.Reason, w) {
				t.Errorf("%s: reason %q lacks %q", id, rec.Reason, w)
			}
		}
		if got := u.pace(t, "", "logs", id); !strings.Contains(got, "before_first_result") {
			t.Errorf("%s: log lacks the failure:\n%s", id, got)
		}
	}
}
