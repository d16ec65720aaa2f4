package visualizer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
	"github.com/pace-platform/pace/stages/visualizer"
)

var _ visualizer.Bus = (*bus.Client)(nil)

const tokens = `alice-token,alice,1
bob-token,bob,2
root-token,root,0,"pace:admins"
`

// env is the manager's API and the UI on one mux behind auth.Middleware,
// as 'pace up' serves them, on a real embedded NATS server.
type env struct {
	t    *testing.T
	srv  *bus.Server
	c    *bus.Client
	http *httptest.Server
	ui   *visualizer.Stage
}

// newEnv starts the env; opts set up the UI over the env's bus client
// before its routes are registered.
func newEnv(t *testing.T, opts ...func(*visualizer.Stage, *bus.Client)) *env {
	t.Helper()
	return newEnvWith(t, visualizer.Config{Interval: 50 * time.Millisecond}, opts...)
}

// newEnvWith starts the env with the UI's configuration cfg, its Run
// following job events as pace up runs it.
func newEnvWith(t *testing.T, uiCfg visualizer.Config, opts ...func(*visualizer.Stage, *bus.Client)) *env {
	t.Helper()
	srv := bustest.Server(t)
	e := &env{t: t, srv: srv, c: bustest.Client(t, srv)}
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	e.http = httptest.NewUnstartedServer(auth.Middleware(tf)(mux))
	cfg := manager.Config{Interval: 50 * time.Millisecond, VisualizerURL: "http://" + e.http.Listener.Addr().String() + "/ui"}
	m, err := manager.New(manager.Deps{Bus: e.c}, cfg, manager.WithAuthenticator(tf), manager.WithUsers(tf))
	if err != nil {
		t.Fatal(err)
	}
	manager.NewAPI(m).Register(mux)
	if e.ui, err = visualizer.New(visualizer.Deps{Bus: e.c}, uiCfg); err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(e.ui, e.c)
	}
	e.ui.Register(mux)
	e.http.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done, uiDone := make(chan error, 1), make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	go func() { uiDone <- e.ui.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager run: %v", err)
		}
		if err := <-uiDone; err != nil {
			t.Errorf("ui run: %v", err)
		}
		e.http.Close()
	})
	return e
}

func (e *env) do(method, path, token, body string) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// submit submits a job as token's user, retrying until the manager runs.
func (e *env) submit(token, doc string) string {
	e.t.Helper()
	var id string
	bustest.Eventually(e.t, 5*time.Second, "job submitted", func() bool {
		code, b := e.do("POST", "/submissions", token, doc)
		var r struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal(b, &r)
		id = r.JobID
		return code == http.StatusAccepted
	})
	return id
}

// progress publishes a progress sample, as the processor does.
func (e *env) progress(p *schemas.Progress) {
	e.t.Helper()
	ctx := context.Background()
	msg, err := bus.NewMsg(ctx, e.c.Prefix().Metrics(p.Job, schemas.ProgressMetrics), p)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.c.JetStream().PublishMsg(ctx, msg); err != nil {
		e.t.Fatal(err)
	}
}

// event is one Server-Sent Event.
type event struct {
	name string
	data []byte
}

// events opens an event stream and returns its events; it ends with the test.
func (e *env) events(path, token string) (int, <-chan event) {
	e.t.Helper()
	code, ch, _ := e.stream(path, token)
	return code, ch
}

// stream opens an event stream and returns its events and the func that
// closes it; it ends with the test at the latest.
func (e *env) stream(path, token string) (int, <-chan event, func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.http.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.http.Client().Do(req) //nolint:bodyclose // closed below or by the reading goroutine
	if err != nil {
		e.t.Fatal(err)
	}
	ch := make(chan event)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		close(ch)
		return resp.StatusCode, ch, cancel
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Errorf("content type %q, want text/event-stream", ct)
	}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<22)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = append(ev.data, line[6:]...)
			case line == "":
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
				ev = event{}
			}
		}
	}()
	return resp.StatusCode, ch, cancel
}

// next waits for the first event of ch into v that satisfies cond, failing
// the test only after bustest.MinWait: the event ends the wait.
func next[T any](t *testing.T, ch <-chan event, what string, cond func(T) bool) T {
	t.Helper()
	timeout := time.After(bustest.MinWait)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: stream ended", what)
			}
			var v T
			if err := json.Unmarshal(ev.data, &v); err != nil {
				t.Fatalf("%s: event %s %s: %v", what, ev.name, ev.data, err)
			}
			if cond(v) {
				return v
			}
		case <-timeout:
			t.Fatalf("%s: no such event in %s", what, bustest.MinWait)
		}
	}
}
