package kubeproxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/policysource"
)

// heldSource applies an empty policy once it is released.
type heldSource struct{ release chan struct{} }

func (s heldSource) Run(ctx context.Context, apply policysource.Apply) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil
	}
	if err := apply(ctx, policy.Objects{}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// TestServerServesOncePolicyIsInForce: nothing is served before the policy
// source's first policy applies; then a request goes through APF to the
// upstream, and the proxy's own endpoints answer beside it.
func TestServerServesOncePolicyIsInForce(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "upstream "+r.URL.Path)
	}))
	defer upstream.Close()
	up, _ := url.Parse(upstream.URL)
	log := slog.New(slog.DiscardHandler)
	gate, reg := apftest.NewGate(t, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), "")
	src := heldSource{release: make(chan struct{})}
	transport := NewTransport(nil)
	srv := &Server{Proxy: New(Config{Upstream: up, Transport: transport, Log: log}), Gate: gate, Metrics: reg,
		Ready: NewReadiness(transport, up, "", log), Policy: src, Log: log}

	served := make(chan http.Handler, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(ctx, func(ctx context.Context, h http.Handler) error {
			served <- h
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case <-served:
		t.Fatal("served before the policy was in force")
	case <-time.After(100 * time.Millisecond):
	}
	close(src.release)
	var h http.Handler
	select {
	case h = <-served:
	case <-time.After(apftest.Patience):
		t.Fatalf("not served within %s of the policy", apftest.Patience)
	}
	for path, want := range map[string]string{"/api/v1/namespaces": "upstream /api/v1/namespaces", "/livez": "ok"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if body, _ := io.ReadAll(rec.Body); rec.Code != http.StatusOK || string(body) != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, rec.Code, body, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
