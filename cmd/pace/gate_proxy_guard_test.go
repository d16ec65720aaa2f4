package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
)

// TestProxyExemptsOnlyProbeReads replays issue 17 item 4 against pace gate
// proxy with its default flow schemas: a POST /metrics, which the proxy
// passes upstream, was exempt for anyone, so an anonymous flood of them
// ran unlimited against the upstream; now it queues on pace-anonymous.
// /metrics and the dumps are for their readers, and a slow body never
// reaches the upstream.
func TestProxyExemptsOnlyProbeReads(t *testing.T) {
	t.Parallel()
	var upstreamSaw atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		upstreamSaw.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(guardTokens+"kube-admin,kube-admin,0,\"system:masters\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := runProxy(t, "--upstream", up.URL, "--token-file", tokens, "--body-timeout", "1s", "--max-body", "1KiB")

	level := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := patientClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(apfhttp.HeaderPriorityLevelUID)
	}
	uid := func(name string) string { return apf.UID("PriorityLevelConfiguration", name, "") }
	for _, c := range []struct {
		method, path, token string
		code                int
		level               string
	}{
		{"POST", "/metrics", "", http.StatusOK, "pace-anonymous"}, // passed upstream, no longer exempt
		{"POST", "/readyz", "", http.StatusOK, "pace-anonymous"},
		{"POST", "/metrics", "alice-token", http.StatusOK, "global-default"},
		{"GET", "/healthz", "", http.StatusOK, "exempt"},
		{"GET", "/metrics", "", http.StatusUnauthorized, "exempt"},
		{"GET", "/metrics", "alice-token", http.StatusForbidden, "exempt"},
		{"GET", "/metrics", "prom-token", http.StatusOK, "exempt"},
		{"GET", "/debug/api_priority_and_fairness/dump_priority_levels", "", http.StatusUnauthorized, "pace-anonymous"},
		{"GET", "/debug/api_priority_and_fairness/dump_priority_levels", "prom-token", http.StatusForbidden, "global-default"},
		{"GET", "/debug/api_priority_and_fairness/dump_priority_levels", "kube-admin", http.StatusOK, "exempt"},
	} {
		code, got := level(c.method, c.path, c.token, "")
		if code != c.code || got != uid(c.level) {
			t.Errorf("%s %s as %q: %d on level %s, want %d on %s (%s)", c.method, c.path, c.token, code, got, c.code, c.level, uid(c.level))
		}
	}
	saw := upstreamSaw.Load()
	if code, _ := level("POST", "/api/v1/namespaces/a/configmaps", "alice-token", strings.Repeat("x", 1025)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over --max-body: %d, want 413", code)
	}
	conn := slowBody(t, url, "/api/v1/namespaces/a/configmaps")
	if code := answer(conn); code != http.StatusRequestTimeout {
		t.Errorf("a slow body: %d, want 408", code)
	}
	if n := upstreamSaw.Load() - saw; n != 0 {
		t.Errorf("the upstream saw %d of the refused bodies, want none", n)
	}
}
