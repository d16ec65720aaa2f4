package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
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

// bodyLimits are what apfhttp.ReadBody reads before admission: bodies of at
// most maxBytes within --body-timeout; anonymous ones bounded when callers
// authenticate (without a token file every caller is anonymous).
func (f *httpFlags) bodyLimits(maxBytes int64, authenticated bool) apfhttp.BodyLimits {
	l := apfhttp.BodyLimits{MaxBytes: maxBytes, Timeout: f.bodyTimeout}
	if authenticated {
		l.MaxAnonymous = apfhttp.AnonymousBodies
	}
	return l
}

// serve serves h on ln until ctx ends, then shuts down gracefully.
func (f *httpFlags) serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	return httpserver.Serve(ctx, ln, h, f.tls, log)
}
