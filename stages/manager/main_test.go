package manager_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

const tokens = `alice-token,alice,1
bob-token,bob,2
root-token,root,0,"pace:admins"
`

// env is a manager on a real embedded NATS server behind real HTTP, with
// the same middleware as 'pace up --token-file'.
type env struct {
	t      *testing.T
	srv    *bus.Server
	c      *bus.Client
	m      *manager.Stage
	clock  *clocktesting.FakeClock
	http   *httptest.Server
	files  *httptest.Server // serves workloads
	cancel context.CancelFunc
	done   chan error
}

type envOption func(*manager.Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	return newEnvAt(t, bustest.Server(t), opts...)
}

func newEnvAt(t *testing.T, srv *bus.Server, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, srv: srv, c: bustest.Client(t, srv), clock: clocktesting.NewFakeClock(time.Now())}
	e.files = httptest.NewServer(workloads())
	t.Cleanup(e.files.Close)
	cfg := manager.Config{WorkloadTimeout: time.Minute, MaxWorkloadBytes: 1 << 16, MaxBodyBytes: 1 << 16}
	for _, o := range opts {
		o(&cfg)
	}
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	e.m, err = manager.New(manager.Deps{Bus: e.c}, cfg, manager.WithClock(e.clock), manager.WithUsers(tf), manager.WithAuthenticator(tf))
	if err != nil {
		t.Fatal(err)
	}
	h := manager.NewAPI(e.m).Handler()
	if !cfg.Open {
		h = auth.Middleware(tf)(h)
	}
	e.http = httptest.NewServer(h)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.m.Run(ctx) }()
	t.Cleanup(e.stop)
	// Run has recovered and subscribed once a NATS submission is answered.
	bustest.Eventually(t, 5*time.Second, "manager listening", func() bool {
		_, err := e.c.Jobs().Submit(context.Background(), []byte(`{`))
		var apiErr *schemas.APIError
		return asAPIError(err, &apiErr)
	})
	return e
}

func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("manager run: %v", err)
	}
	e.cancel = nil
	e.http.Close()
}

// response is an HTTP answer.
type response struct {
	code int
	body []byte
	hdr  http.Header
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) apiError(t *testing.T) schemas.APIError {
	t.Helper()
	var e schemas.APIError
	r.json(t, &e)
	return e
}

// do sends a request with a bearer token ("" for none) and a JSON body.
func (e *env) do(method, path, token, body string) response {
	return e.doCT(method, path, token, body, "application/json")
}

func (e *env) doCT(method, path, token, body, ct string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" && ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, b, resp.Header}
}

// submit posts a job and returns its id, failing the test unless 202.
func (e *env) submit(token, body string) string {
	e.t.Helper()
	r := e.do("POST", "/submissions", token, body)
	if r.code != http.StatusAccepted {
		e.t.Fatalf("submit = %d %s, want 202", r.code, r.body)
	}
	var out struct {
		JobID string `json:"job_id"`
	}
	r.json(e.t, &out)
	return out.JobID
}

// status returns a job's view.
func (e *env) status(token, id string) map[string]any {
	e.t.Helper()
	r := e.do("GET", "/submissions/"+id, token, "")
	if r.code != http.StatusOK {
		e.t.Fatalf("status %s = %d %s", id, r.code, r.body)
	}
	var v map[string]any
	r.json(e.t, &v)
	return v
}

// waitState reconciles until the job reaches state.
func (e *env) waitState(id string, state schemas.JobState) {
	e.t.Helper()
	ctx := context.Background()
	var last schemas.JobState
	bustest.Eventually(e.t, 20*time.Second, "job "+id+" "+string(state)+" (last "+string(last)+")", func() bool {
		e.m.Reconcile(ctx)
		rec, err := e.c.Jobs().Status(ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		last = rec.State
		return rec.State == state
	})
}

// work runs n workers on job with h until the test ends.
func (e *env) work(job string, n int, h bus.Handler) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, n)
	for i := range n {
		w, err := e.c.Worker(job, h, bus.WithWorkerID("w"+string(rune('a'+i))), bus.WithGrace(time.Second),
			bus.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
		if err != nil {
			e.t.Fatal(err)
		}
		go func() { _ = w.Run(ctx); done <- struct{}{} }()
	}
	e.t.Cleanup(func() {
		cancel()
		for range n {
			<-done
		}
	})
}

func upper(_ context.Context, it *schemas.WorkItem) (string, error) {
	return strings.ToUpper(it.Payload), nil
}

// workloads serves test workload files.
func workloads() http.Handler {
	mux := http.NewServeMux()
	text := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, body)
		}
	}
	mux.HandleFunc("/five.txt", text("a\nb\n\nc\nd\ne")) // blank line, no trailing newline
	mux.HandleFunc("/three.txt", text("x\ny\nz\n"))
	mux.HandleFunc("/empty.txt", text("\n\n"))
	mux.HandleFunc("/big.txt", text(strings.Repeat("0123456789abcdef\n", 5000)))
	mux.HandleFunc("/image.png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0, 0})
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte{0xff, 0xfe, 0, 1})
	})
	mux.HandleFunc("/slow.txt", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers before the client gives up
	})
	return mux
}

func asAPIError(err error, target **schemas.APIError) bool {
	e, ok := err.(*schemas.APIError) //nolint:errorlint // Submit returns it unwrapped
	if ok {
		*target = e
	}
	return ok
}
