package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func httpGet(t *testing.T, url, token string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // test
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestUpAPF checks that pace up puts APF in front of its HTTP API: the
// metrics, the debug dumps, the classification headers and authentication
// through --token-file.
func TestUpAPF(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1,\"team-a\"\nroot-token,root,0,\"pace:admins\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, filepath.Join(dir, "data"), "--token-file", tokens,
		"--flowcontrol-config", "../../examples/flowcontrol/health-for-strangers.yaml", "--max-requests-inflight", "20", "--max-mutating-requests-inflight", "10")
	code, _, h := httpGet(t, u.httpURL+"/livez", "")
	if code != 200 || h.Get("X-Kubernetes-PF-PriorityLevel-UID") == "" {
		t.Errorf("livez: %d, headers %v", code, h)
	}
	if code, _, _ := httpGet(t, u.httpURL+"/livez", "wrong"); code != 401 {
		t.Errorf("bad token: %d, want 401", code)
	}
	code, body, _ := httpGet(t, u.httpURL+"/metrics", "root-token")
	for _, want := range []string{
		`apiserver_flowcontrol_nominal_limit_seats{priority_level="pace-submissions"}`,
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="probes",priority_level="exempt"}`,
		`apiserver_flowcontrol_current_limit_seats{priority_level="global-default"}`,
		`apiserver_current_inflight_requests{request_kind="readOnly"}`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, body, _ = httpGet(t, u.httpURL+"/debug/api_priority_and_fairness/dump_priority_levels", "root-token")
	if code != 200 || !strings.HasPrefix(body, "PriorityLevelName,") || !strings.Contains(body, "pace-submissions,") {
		t.Errorf("dump_priority_levels: %d\n%s", code, body)
	}
	u.stop(t)
}
