package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// probe returns the status and body of GET url.
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec // the test's own proxy
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProxyReadyzFollowsTheUpstream: /readyz is ready while the upstream's
// own /readyz answers 200, not ready while it fails, ready again once it
// recovers; /livez is the proxy's alone throughout.
func TestProxyReadyzFollowsTheUpstream(t *testing.T) {
	t.Parallel()
	var upstreamStatus atomic.Int32
	upstreamStatus.Store(http.StatusOK)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(int(upstreamStatus.Load()))
		}
	}))
	defer upstream.Close()
	url := runProxy(t, "--upstream", upstream.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if code, body := probe(t, url+"/readyz?verbose"); code != http.StatusOK ||
		body != "[+]ping ok\n[+]upstream ok\nreadyz check passed\n" {
		t.Errorf("ready upstream: %d %q", code, body)
	}
	upstreamStatus.Store(http.StatusServiceUnavailable)
	readyz(ctx, t, url, http.StatusInternalServerError, "[+]ping ok\n[-]upstream failed: reason withheld\nreadyz check failed\n")
	if code, body := probe(t, url+"/livez"); code != http.StatusOK || body != "ok" {
		t.Errorf("livez with the upstream not ready: %d %q, want the proxy's own ok", code, body)
	}
	upstreamStatus.Store(http.StatusOK)
	readyz(ctx, t, url, http.StatusOK, "ok")
}

// readyz waits until the proxy's /readyz answers code and body; the
// upstream is asked at most every second.
func readyz(ctx context.Context, t *testing.T, url string, code int, body string) {
	t.Helper()
	eventually(ctx, t, "readyz "+strings.TrimSpace(body), func() (bool, string) {
		got, b := probe(t, url+"/readyz")
		return got == code && b == body, b
	})
}
