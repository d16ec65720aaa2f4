package kubeproxy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/stages/gate/kubeproxy"
)

// upstream records the headers of the requests it gets and answers with
// an APF classification of its own, as kube-apiserver does.
func upstream(t *testing.T) (*url.URL, <-chan http.Header) {
	t.Helper()
	seen := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("X-Kubernetes-PF-FlowSchema-UID", "upstream-schema")
		w.Header().Set("X-Kubernetes-PF-PriorityLevel-UID", "upstream-level")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u, seen
}

// TestTheProxyActsAsItsCaller: with Impersonate, the upstream sees the
// proxy's token acting as the authenticated caller (system:authenticated
// left to the upstream), never the caller's own credentials or identity
// headers, and the client sees no classification of the upstream's.
func TestTheProxyActsAsItsCaller(t *testing.T) {
	up, seen := upstream(t)
	proxy := kubeproxy.New(kubeproxy.Config{Upstream: up, Transport: kubeproxy.NewTransport(nil), Impersonate: true, Token: "proxy-token"})
	req := httptest.NewRequest("GET", "/api/v1/pods", nil)
	req.Header.Set("Authorization", "Bearer caller-token")
	req.Header.Set("X-Remote-User", "mallory") // a forged front-proxy identity
	alice := auth.User{Name: "alice", UID: "u-1", Groups: []string{"team-a", auth.Authenticated}, Extra: map[string][]string{"scopes.k8s.io": {"x"}}}
	req = req.WithContext(auth.WithUser(req.Context(), alice))
	rec := httptest.NewRecorder()
	proxy.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	h := <-seen
	for name, want := range map[string][]string{
		"Authorization":                   {"Bearer proxy-token"},
		"Impersonate-User":                {"alice"},
		"Impersonate-Uid":                 {"u-1"},
		"Impersonate-Group":               {"team-a"},
		"Impersonate-Extra-Scopes.k8s.io": {"x"},
		"X-Remote-User":                   nil,
	} {
		if got := h.Values(name); !slices.Equal(got, want) {
			t.Errorf("upstream %s = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"X-Kubernetes-PF-FlowSchema-UID", "X-Kubernetes-PF-PriorityLevel-UID"} {
		if v := rec.Header().Get(name); v != "" {
			t.Errorf("client sees the upstream's %s %q", name, v)
		}
	}
}

// TestAnAnonymousCallerIsImpersonatedAsAnonymous: a caller without
// credentials acts upstream as system:anonymous, not as the proxy.
func TestAnAnonymousCallerIsImpersonatedAsAnonymous(t *testing.T) {
	up, seen := upstream(t)
	proxy := kubeproxy.New(kubeproxy.Config{Upstream: up, Transport: kubeproxy.NewTransport(nil), Impersonate: true, Token: "proxy-token"})
	proxy.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/version", nil))
	h := <-seen
	if got := h.Get("Impersonate-User"); got != auth.Anonymous {
		t.Errorf("Impersonate-User = %q, want %q", got, auth.Anonymous)
	}
}

// TestImpersonationAskedByTheCallerIsRefused: a caller's own Impersonate-*
// header is refused with a kube Status, before the upstream is reached.
func TestImpersonationAskedByTheCallerIsRefused(t *testing.T) {
	reached := false
	h := kubeproxy.RefuseImpersonation(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	req := httptest.NewRequest("GET", "/api/v1/secrets", nil)
	req.Header.Set("Impersonate-User", "system:admin")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var status struct {
		Kind, Reason string
		Code         int
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &status); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if reached || rec.Code != http.StatusForbidden || status.Kind != "Status" || status.Reason != "Forbidden" || status.Code != http.StatusForbidden {
		t.Errorf("reached=%v, %d %+v; want a 403 Forbidden Status and no upstream", reached, rec.Code, status)
	}
}

// TestAnUnreachableUpstreamIsABadGateway: the proxy answers 502 with a
// kube Status when the upstream cannot be reached.
func TestAnUnreachableUpstreamIsABadGateway(t *testing.T) {
	up, _ := upstream(t)
	dead := *up
	srv := httptest.NewServer(http.NotFoundHandler())
	dead.Host = srv.Listener.Addr().String()
	srv.Close() // its port now refuses connections
	proxy := kubeproxy.New(kubeproxy.Config{Upstream: &dead, Transport: kubeproxy.NewTransport(nil)})
	rec := httptest.NewRecorder()
	proxy.ServeHTTP(rec, httptest.NewRequest("GET", "/api", nil))
	if rec.Code != http.StatusBadGateway || !json.Valid(rec.Body.Bytes()) {
		t.Errorf("%d %s, want 502 with a Status", rec.Code, rec.Body)
	}
}
