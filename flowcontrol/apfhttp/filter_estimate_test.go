package apfhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/flowcontrol/work"
	"github.com/pace-platform/pace/internal/auth"
)

// configMapList is a list of n items whose JSON encodings are exactly size bytes each.
func configMapList(n, size int) string {
	items := make([]string, n)
	for i := range items {
		item := fmt.Sprintf(`{"metadata":{"name":"cm-%04d"},"data":{"x":""}}`, i)
		items[i] = strings.Replace(item, `""}}`, `"`+strings.Repeat("a", size-len(item))+`"}}`, 1)
	}
	return `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` + strings.Join(items, ",") + `]}`
}

// estimatedSeats returns the sum and count of work_estimated_seats so far.
func estimatedSeats(t *testing.T, reg *prometheus.Registry) (sum float64, count uint64) {
	return apftest.HistogramTotals(t, reg, "apiserver_flowcontrol_work_estimated_seats")
}

// TestFilterEstimatesWork runs the filter with LearnObjectCounts in front of
// a real HTTP server and checks the seats it charges: a list of an unknown
// resource costs 1; the cluster-wide list teaches 50 objects of 10,000 bytes,
// so the next list from storage costs ceil(50×10,000/100,000) = 5 seats and a
// limit=20 one 2; namespaced or selected lists teach nothing; a write
// notified to 25 watches in progress costs ceil(25/10) = 3 final seats, and 1
// once they ended. An invalid list costs the level's cap.
func TestFilterEstimatesWork(t *testing.T) {
	g, reg := apftest.NewGate(t, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), "")
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	list := configMapList(50, 10_000)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/configmaps", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, list)
	})
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/configmaps", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, configMapList(3, 100))
	})
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) { // watches
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /api/v1/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(auth.Middleware(tf)(apfhttp.Middleware(g, apfhttp.KubeResolver, apfhttp.LearnObjectCounts())(mux)))
	defer srv.Close()
	do := func(ctx context.Context, method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	charged := func(method, path string) float64 {
		t.Helper()
		before, _ := estimatedSeats(t, reg)
		resp := do(context.Background(), method, path)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
		after, _ := estimatedSeats(t, reg)
		return after - before
	}
	capSeats := 0
	for _, l := range g.Dump() {
		if l.Name == "global-default" {
			capSeats = l.MaxSeats
		}
	}
	for _, step := range []struct {
		method, path string
		want         float64
	}{
		{"GET", "/api/v1/configmaps", 1}, // unknown yet: the minimum, as an aggregated resource in kube
		{"GET", "/api/v1/configmaps", 5},
		{"GET", "/api/v1/configmaps?limit=20&resourceVersion=5", 2},
		{"GET", "/api/v1/namespaces/a/configmaps", 5}, // all 50 loaded from storage; teaches nothing
		{"GET", "/api/v1/configmaps?labelSelector=x%3Dy", 5},
		{"GET", "/api/v1/configmaps?limit=abc", float64(capSeats)}, // invalid options: the level's cap
	} {
		if got := charged(step.method, step.path); got != step.want {
			t.Errorf("%s %s charged %v seats, want %v", step.method, step.path, got, step.want)
		}
	}
	if s, err := g.ObjectCounts().ObjectStats("", "configmaps"); err != nil || s != (work.Stats{ObjectCount: 50, AverageObjectSizeBytes: 10_000}) {
		t.Errorf("learned %+v, %v; want 50 objects of 10000 bytes", s, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	for range 25 {
		resp := do(ctx, "GET", "/api/v1/namespaces/a/pods?watch=true")
		defer resp.Body.Close() //nolint:errcheck // ended by cancel below
	}
	post := &work.Request{Verb: "create", Resource: "pods", Namespace: "a"}
	if n := g.Watches().WatchCount(post); n != 25 {
		t.Fatalf("%d watches tracked, want 25", n)
	}
	if got := charged("POST", "/api/v1/namespaces/a/pods"); got != 3 {
		t.Errorf("write to 25 watchers charged %v seats, want 3", got)
	}
	if got := charged("POST", "/api/v1/namespaces/b/pods"); got != 1 {
		t.Errorf("write to another namespace charged %v seats, want 1", got)
	}
	cancel()
	for deadline := time.Now().Add(apftest.Patience); g.Watches().WatchCount(post) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches still tracked after they ended", g.Watches().WatchCount(post))
		}
	}
	if got := charged("POST", "/api/v1/namespaces/a/pods"); got != 1 {
		t.Errorf("write after the watches ended charged %v seats, want 1", got)
	}
	// kube's watch_count_samples: one observation per write, of its watch count
	if sum, count := apftest.HistogramTotals(t, reg, "apiserver_flowcontrol_watch_count_samples"); sum != 25 || count != 3 {
		t.Errorf("watch_count_samples: sum %v over %d writes, want 25 over 3", sum, count)
	}
}
