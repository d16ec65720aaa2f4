package kubeproxy

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/policysource"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/kubestatus"
)

// Server is pace gate proxy as a whole: the proxy behind authentication,
// bodies read within their limits, and APF admission, as kube-apiserver
// orders its filters; beside it the proxy's own endpoints.
type Server struct {
	// Proxy forwards what APF admits (New).
	Proxy http.Handler
	// Gate admits requests; Metrics is the registry of its metrics and
	// the process's, served on /metrics.
	Gate    *apf.Gate
	Metrics *prometheus.Registry
	// Authn authenticates callers; nil: every caller is anonymous.
	Authn auth.Authenticator
	// Body bounds request bodies, read before admission.
	Body apfhttp.BodyLimits
	// Ready is the upstream's readiness, part of /readyz.
	Ready *Readiness
	// MetricsReaders and DumpReaders guard /metrics and the APF dumps
	// (nil: open to every caller).
	MetricsReaders, DumpReaders func(http.Handler) http.Handler
	// Policy keeps the gate's policy current; nil: the gate keeps the one
	// it was built with.
	Policy policysource.Source
	Log    *slog.Logger
}

// Handler is the server's handler: health probes, /metrics, the APF dumps
// and the proxy, admitted by APF (with its object counts learned from the
// lists it passes), behind body limits and authentication; every answer
// of its own is a kube-apiserver Status.
func (s *Server) Handler() http.Handler {
	open := func(h http.Handler) http.Handler { return h }
	metricsReaders, dumpReaders := s.MetricsReaders, s.DumpReaders
	if metricsReaders == nil {
		metricsReaders = open
	}
	if dumpReaders == nil {
		dumpReaders = open
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", HealthHandler("healthz", Ping))
	mux.HandleFunc("/livez", HealthHandler("livez", Ping))
	mux.HandleFunc("/readyz", HealthHandler("readyz", Ping, HealthCheck{Name: "upstream", Check: s.Ready.Check}))
	mux.Handle("GET /metrics", metricsReaders(promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{Registry: s.Metrics})))
	mux.Handle(apfhttp.DebugPrefix, dumpReaders(apfhttp.DebugHandler(s.Gate)))
	mux.Handle("/", s.Proxy)
	admitted := apfhttp.Middleware(s.Gate, apfhttp.KubeResolver, apfhttp.LearnObjectCounts(), apfhttp.WithErrorWriter(kubestatus.Write))(mux)
	limits := s.Body
	limits.Errors = kubestatus.Write
	return auth.Middleware(s.Authn, auth.WithErrorWriter(kubestatus.Write))(RefuseImpersonation(apfhttp.ReadBody(limits)(admitted)))
}

// Run runs the gate and the policy source and, once the source's first
// policy is in force, serve with Handler, until ctx ends or one of them
// fails.
func (s *Server) Run(ctx context.Context, serve func(ctx context.Context, h http.Handler) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Gate.Run(gctx) })
	if s.Policy != nil {
		first := make(chan struct{})
		var once sync.Once
		apply := func(ctx context.Context, objs policy.Objects) error {
			defer once.Do(func() { close(first) })
			if err := s.Gate.Reconfigure(ctx, objs); err != nil {
				return err
			}
			WarnIgnored(s.Log, s.Gate.Digest())
			return nil
		}
		g.Go(func() error { return s.Policy.Run(gctx, apply) })
		select {
		case <-first:
		case <-gctx.Done():
			return g.Wait()
		}
	}
	g.Go(func() error { return serve(gctx, s.Handler()) })
	return g.Wait()
}

// WarnIgnored logs the objects the policy in force ignores.
func WarnIgnored(log *slog.Logger, d *policy.Digest) {
	for _, name := range d.Dangling {
		log.Warn("flow schema dangling: its priority level does not exist", "flow_schema", name)
	}
	for _, name := range d.Broken {
		log.Warn("invalid flowcontrol object ignored", "object", name)
	}
}
