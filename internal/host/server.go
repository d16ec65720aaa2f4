package host

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/httpserver"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/internal/tracing"
)

// ServerConfig is what a Server is made of.
type ServerConfig struct {
	// Bus is the process's connection.
	Bus *bus.Client
	Log *slog.Logger
	// Shared is what its stages share; the command fills it (and its
	// Providers add to it) before they wire.
	Shared Shared
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
	// BodyTimeout bounds the arrival of a request body, read whole before
	// APF admits the request (apfhttp.ReadBody).
	BodyTimeout time.Duration
	// StageClient, when set, connects a stage as its own NATS user (pace
	// up with authentication); otherwise every stage uses Bus.
	StageClient func(ctx context.Context, stage string) (*bus.Client, error)
}

// Server is a process running stages: the Process they wire into, and what
// runs them — their loops on every replica, their leaders' terms, and the
// HTTP server of its health, metrics, job API and UI.
type Server struct {
	cfg     ServerConfig
	reg     *prometheus.Registry
	loops   []runner.Loop
	terms   []*runner.Term
	clients []*bus.Client // the stages' own connections, closed by Close
}

// NewServer returns a Server of nothing yet: stages wire into it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Shared.API == nil {
		cfg.Shared.API = http.NewServeMux()
	}
	if cfg.Shared.UI == nil {
		cfg.Shared.UI = http.NewServeMux()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		bus.NewStreamCollector(cfg.Bus), cfg.Bus.Jobs().MalformedEvents())
	return &Server{cfg: cfg, reg: reg}
}

// Client returns the connection stage talks to the bus with (Process).
func (s *Server) Client(ctx context.Context, stage string) (*bus.Client, error) {
	if s.cfg.StageClient == nil {
		return s.cfg.Bus, nil
	}
	c, err := s.cfg.StageClient(ctx, stage)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", stage, err)
	}
	s.clients = append(s.clients, c)
	return c, nil
}

// Logger is the process's logger (Process).
func (s *Server) Logger() *slog.Logger { return s.cfg.Log }

// Register adds collectors to /metrics (Process).
func (s *Server) Register(cs ...prometheus.Collector) { s.reg.MustRegister(cs...) }

// Registerer is the process's /metrics registry, for what registers itself.
func (s *Server) Registerer() prometheus.Registerer { return s.reg }

// Go runs loop on every replica (Process).
func (s *Server) Go(loop runner.Loop) { s.loops = append(s.loops, loop) }

// Shared is what the process's stages share (Process).
func (s *Server) Shared() *Shared { return &s.cfg.Shared }

// Lead adds a stage's leader-only work (Process). build makes a fresh
// instance for each leadership term, so no in-memory state outlives its
// term, and returns its run func and metrics (nil: none). It is called once
// here, so that bad settings fail at start and not at the first takeover.
func (s *Server) Lead(stage string, build runner.Build) error {
	t, err := runner.NewTerm(stage, build)
	if err != nil {
		return err
	}
	s.reg.MustRegister(t.Metrics())
	s.terms = append(s.terms, t)
	return nil
}

// Elect returns the wrapper that runs each stage's leader work under leader
// election as identity, with a pace_stage_leader gauge per stage; Run
// without it runs the work at once (pace up).
func (s *Server) Elect(identity string) (func(*runner.Term) runner.Loop, error) {
	cands := map[string]*bus.Candidate{}
	for _, t := range s.terms {
		cand, err := s.cfg.Bus.Candidate(t.Stage, identity)
		if err != nil {
			return nil, err
		}
		cands[t.Stage] = cand
		labels := prometheus.Labels{"stage": t.Stage}
		s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pace_stage_leader", Help: "1 while this replica leads the stage, 0 while it stands by.", ConstLabels: labels,
		}, func() float64 {
			if cand.Leading() {
				return 1
			}
			return 0
		}), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "pace_stage_leader_transitions_total", Help: "Times this replica became the stage's leader or stepped down.", ConstLabels: labels,
		}, func() float64 { return float64(cand.Transitions()) }))
	}
	return func(t *runner.Term) runner.Loop {
		return func(ctx context.Context) error { return cands[t.Stage].Run(ctx, t.Run) }
	}, nil
}

// Run runs the wired stages and serves HTTP on ln until ctx ends or one of
// them fails. elect, when set, wraps each stage's leader work in leader
// election; without it the work runs at once.
func (s *Server) Run(ctx context.Context, ln net.Listener, elect func(*runner.Term) runner.Loop) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, loop := range s.loops {
		g.Go(func() error { return runner.Rerun(gctx, s.cfg.Log, bus.Temporary, loop) })
	}
	for _, t := range s.terms {
		run := func(ctx context.Context) error { return runner.Rerun(ctx, s.cfg.Log, bus.Temporary, t.Run) }
		if elect != nil {
			run = elect(t) // a term failing for a while stands by again
		}
		g.Go(func() error { return run(gctx) })
	}
	h := s.handler()
	g.Go(func() error { return httpserver.Serve(gctx, ln, h, s.cfg.TLS, s.cfg.Log) })
	return g.Wait()
}

// Close drains the stages' own connections, each within a few seconds.
func (s *Server) Close() {
	for _, c := range s.clients {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.Close(ctx); err != nil {
			s.cfg.Log.Warn("stage connection not drained", "err", err)
		}
		cancel()
	}
}

// handler is the HTTP handler of everything wired: callers authenticated
// first (a bad token is refused before anything is read), then the API's
// bodies read whole, within BodyTimeout and its stage's largest body, and
// only then the API admitted by APF, with the APF dumps, so that no seat
// waits on a slow client. The health probes and /metrics are served beside
// the API; the UI is outside APF (its streams bound themselves).
func (s *Server) handler() http.Handler {
	sh := &s.cfg.Shared
	authn := sh.Authenticator
	s.ops(sh.API, authn != nil)
	var h http.Handler = sh.API
	resolve, maxBody := sh.admission()
	if resolve != nil {
		sh.API.Handle(apfhttp.DebugPrefix, only(authn != nil, auth.ReadDumps...)(apfhttp.DebugHandler(sh.FlowControl)))
		h = apfhttp.Middleware(sh.FlowControl, resolve)(h)
	}
	if maxBody <= 0 { // no job API
		maxBody = 8 << 20
	}
	limits := apfhttp.BodyLimits{MaxBytes: maxBody, Timeout: s.cfg.BodyTimeout}
	if authn != nil {
		limits.MaxAnonymous = apfhttp.AnonymousBodies
	}
	h = apfhttp.ReadBody(limits)(h)
	sh.UI.Handle("/", h)
	return tracing.HTTP(auth.Middleware(authn)(sh.UI))
}

// ops serves the health probes and the metrics on mux; with authenticated
// set, /metrics only to auth.ReadMetrics. /readyz is ready while NATS and
// JetStream answer, leader or not.
func (s *Server) ops(mux *http.ServeMux, authenticated bool) {
	ready := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := s.cfg.Bus.JetStream().AccountInfo(ctx); err != nil {
			http.Error(w, "jetstream: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", ready)
	mux.HandleFunc("GET /healthz", ready)
	mux.Handle("GET /metrics", only(authenticated, auth.ReadMetrics...)(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})))
}

// only returns auth.Require(groups...) when callers authenticate, else a
// middleware that lets everyone through.
func only(authenticated bool, groups ...string) func(http.Handler) http.Handler {
	if !authenticated {
		return func(h http.Handler) http.Handler { return h }
	}
	return auth.Require(groups...)
}
