package visualizer_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/stages/visualizer"
)

// With a token file, the streams are for callers with a token.
func TestStreamsNeedAToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.submit("alice-token", job)
	for _, p := range []string{"/ui/events/jobs", "/ui/events/jobs/" + id} {
		req, _ := http.NewRequest("GET", e.http.URL+p, nil)
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without a token: %d %v, want 401 asking for a bearer token", p, resp.StatusCode, resp.Header)
		}
	}
	if got := openStreams(t, e.ui); got != 0 {
		t.Errorf("open streams = %v after refusals, want 0", got)
	}
}

// openStreams reads the pace_ui_open_streams gauge of ui.
func openStreams(t *testing.T, ui *visualizer.Stage) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(ui.Metrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "pace_ui_open_streams" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no pace_ui_open_streams")
	return 0
}

// Streams are capped per user and in all: 429 with Retry-After beyond,
// counted, and a closed stream makes room again.
func TestStreamsAreCappedPerUserAndInAll(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, visualizer.Config{Interval: 50 * time.Millisecond, MaxStreams: 3, MaxStreamsPerUser: 2})
	open := func(token string) func() {
		t.Helper()
		code, ch, closeIt := e.stream("/ui/events/jobs", token)
		if code != http.StatusOK {
			t.Fatalf("%s's stream: %d, want 200", token, code)
		}
		next(t, ch, token+"'s list", func([]visualizer.JobRow) bool { return true })
		return closeIt
	}
	refused := func(token, why string) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.http.URL+"/ui/events/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s (%s): %d Retry-After %q, want 429 with Retry-After", token, why, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	closeAlice := open("alice-token")
	open("alice-token")
	refused("alice-token", "a third stream of alice's")
	open("bob-token")
	refused("root-token", "a fourth stream in all")
	if got := openStreams(t, e.ui); got != 3 {
		t.Errorf("open streams = %v, want 3", got)
	}
	closeAlice()
	bustest.Eventually(t, bustest.MinWait, "alice's closed stream uncounted", func() bool {
		return openStreams(t, e.ui) == 2
	})
	open("root-token")
}

// A stream costs no JetStream consumer of its own: the job events that
// wake them are followed once (Run). Before, every connection followed
// them itself and left its consumer on the server for minutes, however
// short it was.
func TestListStreamsLeaveNoConsumersBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("alice-token", job)
	before := e.consumers()
	for range 20 {
		code, ch, closeIt := e.stream("/ui/events/jobs", "alice-token")
		if code != http.StatusOK {
			t.Fatalf("stream: %d", code)
		}
		next(t, ch, "list", func([]visualizer.JobRow) bool { return true })
		closeIt()
	}
	bustest.Eventually(t, bustest.MinWait, "every stream ended", func() bool {
		return openStreams(t, e.ui) == 0
	})
	// One more at most: Run's reader, if it was not made yet.
	if after := e.consumers(); after > before+1 {
		t.Errorf("%d consumers after 20 list streams came and went, %d before", after, before)
	}
}

// consumers counts the consumers of every stream of the env's server.
func (e *env) consumers() int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bustest.MinWait)
	defer cancel()
	js := e.c.JetStream()
	n := 0
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			e.t.Fatal(err)
		}
		cs := s.ConsumerNames(ctx)
		for range cs.Name() {
			n++
		}
		if err := cs.Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := names.Err(); err != nil {
		e.t.Fatal(err)
	}
	return n
}
