package apf_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/auth"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
)

// TestFilterInqueueRequestsCountsOnlyQueuedRequests checks the filter's
// apiserver_current_inqueue_requests{request_kind}: like kube's, the peak of
// the last second of read-only requests in a queue, from joining it until
// dispatched, not for the whole admission. Two exempt GETs run (peak 0 in
// queue: exempt requests never queue; 2 executing); then, on the two seats
// of level split, two of alice's GETs pass through their queue at once and
// a third waits (peak 1, 4 executing); once all are done the peaks fall
// back to 0.
func TestFilterInqueueRequestsCountsOnlyQueuedRequests(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, reg := newGate(t, clk, apf.Config{MaxRequestsInflight: 5}, twoFlows)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); clk.Step(time.Second); <-ran })

	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}, 5), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(auth.Middleware(tf)(g.Middleware(apf.KubeResolver)(handler)))
	t.Cleanup(srv.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	done := make(chan int, 5)
	get := func(token string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}
	readOnly := map[string]string{"request_kind": "readOnly"}
	// tick steps the clock a second and waits for the gate to publish the
	// peaks with executing readOnly requests at executing; it returns the
	// in-queue peak published with them (both are set by the same tick).
	tick := func(when string, executing float64) float64 {
		t.Helper()
		clk.Step(time.Second)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if v, _ := gauge(t, reg, "apiserver_current_inflight_requests", readOnly); v == executing {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: apiserver_current_inflight_requests{readOnly} never reached %v", when, executing)
			}
		}
		v, _ := gauge(t, reg, "apiserver_current_inqueue_requests", readOnly)
		return v
	}
	waitEntered := func() {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("no request reached the handler within 10s")
		}
	}

	go get("root-token")
	go get("root-token")
	waitEntered()
	waitEntered()
	if got := tick("two exempt running", 2); got != 0 {
		t.Fatalf("two exempt requests running: in-queue peak %v, want 0 (they never queued)", got)
	}
	go get("alice-token")
	go get("alice-token")
	waitEntered()
	waitEntered()
	go get("alice-token")
	for deadline := time.Now().Add(10 * time.Second); waiting(g.Dump(), "split") != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("alice's third request never queued")
		}
	}
	if got := tick("one waiting", 4); got != 1 {
		t.Fatalf("one waiting: in-queue peak %v, want 1", got)
	}
	close(release)
	released = true
	for range 5 {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("a request answered %d, want 200", code)
		}
	}
	tick("all done, last second's peaks", 4)
	if got := tick("idle", 0); got != 0 {
		t.Fatalf("idle: in-queue peak %v, want 0", got)
	}
	if v, _ := gauge(t, reg, "apiserver_current_inqueue_requests", map[string]string{"request_kind": "mutating"}); v != 0 {
		t.Fatalf("mutating in-queue peak %v, want 0 (only GETs were sent)", v)
	}
}
