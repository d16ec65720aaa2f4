package apfhttp_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
)

// TestQueueWaitIsAQuarterOfTheRequestTimeout checks the filter's queue wait
// as kube-apiserver computes it, on a fake clock: a quarter of the request's
// ?timeout=, else of the request timeout (1m: 15 s); a timeout above it
// counts as it; a malformed one is a 400 before admission.
func TestQueueWaitIsAQuarterOfTheRequestTimeout(t *testing.T) {
	clk := eventclock.NewFake(time.Unix(1000, 0))
	g, _ := apftest.NewGate(t, clk, apf.Config{MaxRequestsInflight: 1}, apftest.OneQueuedSeat)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	srv := serveGate(t, g, handler)
	t.Cleanup(func() { close(release) })
	get := func(path string) chan int {
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer alice-token")
			resp, err := (&http.Client{Timeout: apftest.Patience}).Do(req)
			if err != nil {
				done <- 0
				return
			}
			_ = resp.Body.Close()
			done <- resp.StatusCode
		}()
		return done
	}
	queued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(apftest.Patience); apftest.Waiting(g.Dump(), "tiny") != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests never waited on tiny", n)
			}
		}
	}
	code := func(done chan int) int {
		t.Helper()
		select {
		case c := <-done:
			return c
		case <-time.After(apftest.Patience):
			t.Fatal("no answer")
			return 0
		}
	}

	holding := get("/hold") // takes tiny's one seat
	<-held
	short, plain := get("/x?timeout=8s"), get("/y")
	queued(2)
	clk.Step(2*time.Second - time.Millisecond)
	queued(2) // both still wait: the shorter may wait 2 s
	clk.Step(2 * time.Millisecond)
	if c := code(short); c != http.StatusTooManyRequests {
		t.Errorf("?timeout=8s after 2 s in its queue: %d, want 429", c)
	}
	queued(1)
	long := get("/z?timeout=10m") // beyond the request timeout: 1m, so 15 s
	queued(2)
	clk.Step(13 * time.Second) // the plain one has waited 15 s
	if c := code(plain); c != http.StatusTooManyRequests {
		t.Errorf("no timeout after 15 s in its queue: %d, want 429", c)
	}
	queued(1)
	clk.Step(15*time.Second - 13*time.Second - time.Millisecond)
	queued(1)
	clk.Step(2 * time.Millisecond)
	if c := code(long); c != http.StatusTooManyRequests {
		t.Errorf("?timeout=10m after 15 s in its queue: %d, want 429", c)
	}
	if c := code(get("/w?timeout=soon")); c != http.StatusBadRequest {
		t.Errorf("?timeout=soon: %d, want 400", c)
	}
	release <- struct{}{}
	if c := code(holding); c != http.StatusOK {
		t.Errorf("the held request: %d", c)
	}
}
