package main

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
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/httpserver"
)

// httpFlags configure the HTTP server of pace up and pace stage: health,
// metrics and, by stage, the job API and the UI.
type httpFlags struct {
	addr    string
	tlsCert string
	tlsKey  string
	tls     *tls.Config // loaded by validate when both files are set
	// bodyTimeout bounds the arrival of a request body, read whole before
	// APF admits the request (apfhttp.ReadBody).
	bodyTimeout time.Duration
}

// add registers the flags; usage says what the command serves on --http.
func (f *httpFlags) add(fs *pflag.FlagSet, addr, usage string) {
	fs.StringVar(&f.addr, "http", addr, usage)
	fs.StringVar(&f.tlsCert, "tls-cert", "", "certificate file (PEM) of the HTTP server; with --tls-key it serves HTTPS")
	fs.StringVar(&f.tlsKey, "tls-key", "", "private key file (PEM) of --tls-cert")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", 30*time.Second,
		"time a request body may take to arrive, read whole before the request queues for a seat (408 and the connection closed after it)")
}

// validate checks the address and loads the certificate.
func (f *httpFlags) validate() error {
	if _, _, err := net.SplitHostPort(f.addr); err != nil {
		return usageError("--http %q: want host:port", f.addr)
	}
	if f.bodyTimeout <= 0 {
		return usageError("--body-timeout %s: must be positive", f.bodyTimeout)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError("--tls-cert and --tls-key go together: set both or neither")
	}
	if f.tlsCert == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return usageError("--tls-cert %q / --tls-key %q: %v", f.tlsCert, f.tlsKey, err)
	}
	f.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return nil
}

// url is the base URL of the server listening on ln.
func (f *httpFlags) url(ln net.Listener) string {
	if f.tls != nil {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// anonymousBodies bounds the request bodies read at once from callers
// without credentials when callers authenticate.
const anonymousBodies = 16

// bodyLimits are what apfhttp.ReadBody reads before admission: bodies of at
// most maxBytes within --body-timeout; anonymous ones bounded when callers
// authenticate (without a token file every caller is anonymous).
func (f *httpFlags) bodyLimits(maxBytes int64, authenticated bool) apfhttp.BodyLimits {
	l := apfhttp.BodyLimits{MaxBytes: maxBytes, Timeout: f.bodyTimeout}
	if authenticated {
		l.MaxAnonymous = anonymousBodies
	}
	return l
}

// Who may read what only admins should see once callers authenticate:
// the APF dumps (every flow's user), and /metrics (every tenant's jobs),
// which Prometheus reads with a token of group pace:metrics.
var (
	dumpReaders    = []string{auth.Admins, auth.Masters}
	metricsReaders = []string{auth.Admins, auth.Masters, auth.MetricsReaders}
)

// only returns auth.Require(groups...) when callers authenticate (a token
// file), else a middleware that lets everyone through.
func only(authenticated bool, groups ...string) func(http.Handler) http.Handler {
	if !authenticated {
		return func(h http.Handler) http.Handler { return h }
	}
	return auth.Require(groups...)
}

// serve serves h on ln until ctx ends, then shuts down gracefully.
func (f *httpFlags) serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	return httpserver.Serve(ctx, ln, h, f.tls, log)
}

// opsHandler serves the health probes and Prometheus metrics of reg, with
// extra collectors (the monitor's pace_job_* and pace_monitor_* metrics);
// with authenticated set (a token file), /metrics only to metricsReaders.
// /readyz is ready while NATS and JetStream answer, leader or not.
func opsHandler(c *bus.Client, reg *prometheus.Registry, authenticated bool, extra ...prometheus.Collector) *http.ServeMux {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		bus.NewStreamCollector(c))
	reg.MustRegister(extra...)
	ready := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := c.JetStream().AccountInfo(ctx); err != nil {
			http.Error(w, "jetstream: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", ready)
	mux.HandleFunc("GET /healthz", ready)
	mux.Handle("GET /metrics", only(authenticated, metricsReaders...)(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return mux
}
