package apfhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/internal/auth"
)

const tokens = `alice-token,alice,1,"team-a"
root-token,root,0,"system:masters"
`

// oneSeat sends every authenticated request to a Reject level with exactly one seat.
const oneSeat = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tiny}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 100, lendablePercent: 0, borrowingLimitPercent: 0, limitResponse: {type: Reject}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: everyone}
spec:
  matchingPrecedence: 500
  priorityLevelConfiguration: {name: tiny}
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: Group, group: {name: "system:authenticated"}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`

type server struct {
	*httptest.Server
	gate    *apf.Gate
	reg     *prometheus.Registry
	release chan struct{}
	once    sync.Once
	entered chan string
}

// releaseAll lets every held handler return; also run at cleanup, before
// the server closes, so a test that failed early does not hang there.
func (s *server) releaseAll() { s.once.Do(func() { close(s.release) }) }

func newServer(t *testing.T, cfg apf.Config, objsYAML string) *server {
	t.Helper()
	gate, reg := apftest.NewGate(t, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, cfg, objsYAML)
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{gate: gate, reg: reg, release: make(chan struct{}), entered: make(chan string, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			s.entered <- "watch"
			<-s.release
			return
		}
		s.entered <- r.URL.Path
		<-s.release
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	s.Server = httptest.NewServer(auth.Middleware(tf)(apfhttp.Middleware(gate, apfhttp.KubeResolver)(mux)))
	t.Cleanup(s.Close)
	t.Cleanup(s.releaseAll) // runs first
	return s
}

// waitEntered returns the next request to reach the handler, failing the
// test instead of hanging when none does.
func (s *server) waitEntered(t *testing.T) string {
	t.Helper()
	select {
	case got := <-s.entered:
		return got
	case <-time.After(apftest.Patience):
		t.Fatalf("no request reached the handler within %s", apftest.Patience)
		return ""
	}
}

func (s *server) get(t *testing.T, path, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: apftest.Patience}).Do(req) // a hang fails the test
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tinyServer makes the tiny level's nominal (and only) limit ceil(1×100/ΣNCS) = 1.
var tinyServer = apf.Config{MaxRequestsInflight: 1}

func TestFilterRejectsWith429(t *testing.T) {
	s := newServer(t, tinyServer, oneSeat)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp := s.get(t, "/api/v1/namespaces/a/pods", "alice-token")
		_ = resp.Body.Close()
	}()
	s.waitEntered(t) // alice holds the only seat
	resp := s.get(t, "/api/v1/namespaces/b/pods", "alice-token")
	defer resp.Body.Close() //nolint:errcheck // test
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q, want a positive number of seconds", ra)
	}
	if resp.Header.Get(apfhttp.HeaderFlowSchemaUID) == "" || resp.Header.Get(apfhttp.HeaderPriorityLevelUID) == "" {
		t.Errorf("classification headers missing: %v", resp.Header)
	}
	var body struct {
		Code    int    `json:"error_code"`
		Name    string `json:"error_name"`
		Message string `json:"error_message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != 429 || body.Name != "TooManyRequests" ||
		!strings.Contains(body.Message, "concurrency-limit") {
		t.Errorf("body %+v (%v), want the 429 envelope naming concurrency-limit", body, err)
	}
	// Counted as kube counts a request it refuses in self-defense: a list of
	// pods in a namespace.
	if v, ok := apftest.Gauge(t, s.reg, "apiserver_request_terminations_total", map[string]string{"verb": "LIST", "group": "", "version": "v1",
		"resource": "pods", "subresource": "", "scope": "namespace", "component": "apiserver", "code": "429"}); !ok || v != 1 {
		t.Errorf("apiserver_request_terminations_total of the refused list = %v (%v), want 1", v, ok)
	}
	// Exempt callers and probes are not limited.
	for _, c := range []struct{ path, token string }{{"/healthz", ""}, {"/healthz", "alice-token"}} {
		resp := s.get(t, c.path, c.token)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s as %q: %d, want 200", c.path, c.token, resp.StatusCode)
		}
	}
	go func() { resp := s.get(t, "/api/v1/namespaces/c/pods", "root-token"); _ = resp.Body.Close() }()
	if got := s.waitEntered(t); got != "/api/v1/namespaces/c/pods" {
		t.Errorf("root entered %s", got)
	}
	s.releaseAll()
	wg.Wait()

	count := func(name string) float64 {
		mfs, err := s.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.Metric {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}
	if got := count("apiserver_flowcontrol_rejected_requests_total"); got != 1 {
		t.Errorf("rejected_requests_total = %v, want 1", got)
	}
	if got := count("apiserver_flowcontrol_dispatched_requests_total"); got < 4 {
		t.Errorf("dispatched_requests_total = %v, want at least 4", got)
	}
}

func TestFilterWatchReleasesSeatAtStart(t *testing.T) {
	s := newServer(t, tinyServer, oneSeat)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/namespaces/a/pods?watch=true", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // test
	s.waitEntered(t)
	// The watch is streaming, so its seat is given back: the handler started
	// the response, and the filter frees the seat concurrently.
	for deadline := time.Now().Add(apftest.Patience); ; time.Sleep(5 * time.Millisecond) {
		seats, ok := apftest.Gauge(t, s.reg, "apiserver_flowcontrol_current_executing_seats", map[string]string{"priority_level": "tiny"})
		if ok && seats == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the streaming watch still holds %v seats (series found: %v)", seats, ok)
		}
	}
	// Its seat is free again, so a list gets in.
	done := make(chan int)
	go func() {
		r := s.get(t, "/api/v1/namespaces/b/pods", "alice-token")
		_ = r.Body.Close()
		done <- r.StatusCode
	}()
	select {
	case got := <-s.entered:
		if got != "/api/v1/namespaces/b/pods" {
			t.Fatalf("entered %s", got)
		}
	case code := <-done:
		t.Fatalf("list answered %d while the watch streams", code)
	case <-time.After(apftest.Patience):
		t.Fatal("list never entered")
	}
	s.releaseAll()
	if code := <-done; code != 200 {
		t.Errorf("list: %d", code)
	}
}

func TestFilterDisabledUsesMaxInflight(t *testing.T) {
	s := newServer(t, apf.Config{MaxRequestsInflight: 1, MaxMutatingRequestsInflight: 1, Disabled: true}, oneSeat)
	go func() { r := s.get(t, "/api/v1/namespaces/a/pods", "alice-token"); _ = r.Body.Close() }()
	s.waitEntered(t)
	resp := s.get(t, "/api/v1/namespaces/b/pods", "alice-token")
	_ = resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("second read: %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	s.releaseAll()
}
