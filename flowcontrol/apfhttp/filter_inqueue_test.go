package apfhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/internal/auth"
)

// TestFilterInqueueRequestsCountsOnlyQueuedRequests checks the filter's
// apiserver_current_inqueue_requests{request_kind}: like kube's, the peak of
// the last second of read-only requests in a queue, from joining it until
// dispatched, not for the whole admission. Two exempt GETs run (peak 0 in
// queue: exempt requests never queue; 2 executing); then, on the two seats
// of level split, two of alice's GETs pass through their queue at once and
// a third waits (peak 1, 4 executing); once all are done the peaks fall
// back to 0. The test publishes each second's peaks itself, on a fake clock.
func TestFilterInqueueRequestsCountsOnlyQueuedRequests(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, reg := apftest.NewGate(t, clk, apf.Config{MaxRequestsInflight: 5}, apftest.TwoFlows)
	entered, release := make(chan struct{}, 5), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "ok")
	})
	srv := serveGate(t, g, handler)
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
		resp, err := (&http.Client{Timeout: apftest.Patience}).Do(req)
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}
	readOnly := map[string]string{"request_kind": "readOnly"}
	// tick ends a second: the gate publishes its peaks (as Run would); tick
	// returns the executing and in-queue ones.
	tick := func() (executing, inQueue float64) {
		t.Helper()
		clk.Step(time.Second)
		g.PublishPeaks()
		executing, _ = apftest.Gauge(t, reg, "apiserver_current_inflight_requests", readOnly)
		inQueue, _ = apftest.Gauge(t, reg, "apiserver_current_inqueue_requests", readOnly)
		return executing, inQueue
	}
	waitEntered := func() {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(apftest.Patience):
			t.Fatalf("no request reached the handler within %s", apftest.Patience)
		}
	}

	go get("root-token")
	go get("root-token")
	waitEntered()
	waitEntered()
	if executing, inQueue := tick(); executing != 2 || inQueue != 0 {
		t.Fatalf("two exempt requests running: peaks %v executing, %v in queue; want 2 and 0 (they never queued)", executing, inQueue)
	}
	go get("alice-token")
	go get("alice-token")
	waitEntered()
	waitEntered()
	go get("alice-token")
	for deadline := time.Now().Add(apftest.Patience); apftest.Waiting(g.Dump(), "split") != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("alice's third request never queued")
		}
	}
	if executing, inQueue := tick(); executing != 4 || inQueue != 1 {
		t.Fatalf("one waiting: peaks %v executing, %v in queue; want 4 and 1", executing, inQueue)
	}
	close(release)
	released = true
	for range 5 {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("a request answered %d, want 200", code)
		}
	}
	// The second in which they finished still has its peaks (the waiter
	// was dispatched by a finish, so executing may briefly have been 5).
	if _, inQueue := tick(); inQueue != 1 {
		t.Fatalf("the second all finished in: in-queue peak %v, want 1", inQueue)
	}
	// (A handler's executing count may end just after its client has the
	// response, so only the in-queue peak is exact here.)
	if _, inQueue := tick(); inQueue != 0 {
		t.Fatalf("idle: in-queue peak %v, want 0", inQueue)
	}
	if v, _ := apftest.Gauge(t, reg, "apiserver_current_inqueue_requests", map[string]string{"request_kind": "mutating"}); v != 0 {
		t.Fatalf("mutating in-queue peak %v, want 0 (only GETs were sent)", v)
	}
}

// TestWatchExecutesUntilItStarts checks apiserver_current_inflight_requests
// for a watch: as in kube, it executes until it has started its response,
// not for as long as it streams.
func TestWatchExecutesUntilItStarts(t *testing.T) {
	g, reg := apftest.NewGate(t, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.DefaultConfig(), apftest.TwoFlows)
	streaming, stop := make(chan struct{}), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(streaming)
		<-stop
	})
	srv := serveGate(t, g, handler)
	t.Cleanup(func() { close(stop) })
	go func() {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/a/pods?watch=true", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		if resp, err := (&http.Client{Timeout: apftest.Patience}).Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-streaming:
	case <-time.After(apftest.Patience):
		t.Fatal("the watch never started")
	}
	readOnly := map[string]string{"request_kind": "readOnly"}
	tick := func() float64 { // a second's end, as Gate.Run publishes it
		g.PublishPeaks()
		v, _ := apftest.Gauge(t, reg, "apiserver_current_inflight_requests", readOnly)
		return v
	}
	// The second's peak may include the watch's start; the next second's
	// must not, though it still streams.
	tick()
	var executing float64
	for deadline := time.Now().Add(apftest.Patience); ; time.Sleep(5 * time.Millisecond) {
		if executing = tick(); executing == 0 || time.Now().After(deadline) {
			break
		}
	}
	if executing != 0 {
		t.Errorf("a streaming watch counts %v executing read-only requests, want 0 once it has started", executing)
	}
}

// serveGate serves handler behind the test tokens and g's filter (kube's
// request resolution) until the test ends.
func serveGate(t *testing.T, g *apf.Gate, handler http.Handler) *httptest.Server {
	t.Helper()
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(auth.Middleware(tf)(apfhttp.Middleware(g, apfhttp.KubeResolver)(handler)))
	t.Cleanup(srv.Close)
	return srv
}
