package host_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
)

// TestServerRunsWhatStagesWireAndServesThem: a loop added with Go and a
// leader's term run (the term without election at once, built anew), the
// probes answer, an API route and a UI route are served; with an
// authenticator, /metrics goes to its readers only and an anonymous call of
// an API route passes to it as system:anonymous.
func TestServerRunsWhatStagesWireAndServesThem(t *testing.T) {
	t.Parallel()
	c := bustest.Client(t, bustest.Server(t))
	tokens, err := auth.ParseTokens(strings.NewReader("prom-token,prom,1,\"pace:metrics\"\nalice-token,alice,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := host.NewServer(host.ServerConfig{Bus: c, Log: slog.New(slog.DiscardHandler), BodyTimeout: time.Second,
		Shared: host.Shared{Authenticator: tokens}})
	looped, led := make(chan struct{}), make(chan struct{})
	s.Go(func(ctx context.Context) error { close(looped); <-ctx.Done(); return nil })
	if err := s.Lead("test", func() (runner.Loop, prometheus.Collector, error) {
		return func(ctx context.Context) error { close(led); <-ctx.Done(); return nil }, nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Shared().API.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		u, _ := auth.FromContext(r.Context())
		_, _ = io.WriteString(w, u.Name)
	})
	s.Shared().UI.HandleFunc("GET /ui/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ui") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, func(ctx context.Context) error { return s.Run(ctx, ln, nil) })
	<-looped
	<-led
	base := "http://" + ln.Addr().String()
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() //nolint:errcheck // read-only
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, token string
		code        int
		body        string
	}{
		{"/livez", "", 200, "ok\n"},
		{"/readyz", "", 200, "ok\n"},
		{"/whoami", "", 200, auth.Anonymous},
		{"/whoami", "alice-token", 200, "alice"},
		{"/ui/", "", 200, "ui"},
		{"/metrics", "", 401, ""},
		{"/metrics", "alice-token", 403, ""},
		{"/metrics", "prom-token", 200, "go_goroutines"},
		{apfhttp.DebugPrefix + "dump_priority_levels", "prom-token", 404, ""}, // the API is not behind APF
	} {
		code, body := get(tc.path, tc.token)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s (token %q) = %d %.80q, want %d with %q", tc.path, tc.token, code, body, tc.code, tc.body)
		}
	}
}
