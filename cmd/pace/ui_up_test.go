package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// firstEvent opens a Server-Sent Events stream and returns its status and
// first event's data line.
func firstEvent(t *testing.T, url, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the first event ends the wait
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // test
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return resp.StatusCode, d
		}
	}
	t.Fatalf("%s: stream ended without an event: %v", url, sc.Err())
	return 0, ""
}

// TestUpServesTheUI checks pace up's web UI: pages, authorised event
// streams outside APF, the flow-control page for admins and visualizer_url.
func TestUpServesTheUI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1\nroot-token,root,0,\"pace:admins\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, filepath.Join(dir, "data"), "--token-file", tokens, "--actuator", "none")
	code, body, h := httpGet(t, u.httpURL+"/ui/", "")
	if code != 200 || !strings.Contains(body, `<label for="token">`) {
		t.Fatalf("/ui/: %d %.200s", code, body)
	}
	if h.Get("X-Kubernetes-PF-PriorityLevel-UID") != "" {
		t.Errorf("/ui/ went through APF: %v", h)
	}

	req, _ := http.NewRequest("POST", u.httpURL+"/submissions", strings.NewReader(`{"name":"ui","deadline":"5m","workload":{"items":["a"]}}`))
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&sub)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || sub.JobID == "" {
		t.Fatalf("submit: %d", resp.StatusCode)
	}

	code, data := firstEvent(t, u.httpURL+"/ui/events/jobs", "alice-token")
	if code != 200 || !strings.Contains(data, `"id":"`+sub.JobID+`"`) {
		t.Errorf("jobs stream: %d %s", code, data)
	}
	code, data = firstEvent(t, u.httpURL+"/ui/events/jobs/"+sub.JobID, "alice-token")
	if code != 200 || !strings.Contains(data, `"progress_svg":"\u003csvg`) {
		t.Errorf("job stream: %d %.300s", code, data)
	}
	if code, _ := firstEvent(t, u.httpURL+"/ui/events/flowcontrol", "alice-token"); code != http.StatusForbidden {
		t.Errorf("flow control for alice: %d, want 403", code)
	}
	code, data = firstEvent(t, u.httpURL+"/ui/events/flowcontrol", "root-token")
	if code != 200 || !strings.Contains(data, `"name":"pace-submissions"`) {
		t.Errorf("flow control for root: %d %.300s", code, data)
	}

	_, body, _ = httpGet(t, u.httpURL+"/submissions/"+sub.JobID+"/visualizer", "alice-token")
	if want := u.httpURL + "/ui/jobs/" + sub.JobID; !strings.Contains(body, want) {
		t.Errorf("visualizer: %s, want %s", body, want)
	}
	u.stop(t)
}
