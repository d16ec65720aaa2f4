// Package httpserver serves Pace's HTTP listeners (pace up, pace stage,
// pace gate proxy) with the same limits, and shuts them down gracefully.
package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Limits of every server: headers must arrive within ReadHeaderTimeout and
// fit in MaxHeaderBytes; an idle keep-alive connection is closed after
// IdleTimeout. There is no write timeout: log follows, UI event streams
// and exec sessions are long-lived. Bodies are bounded before admission
// (apfhttp.ReadBody). On shutdown, requests in flight get ShutdownTimeout.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
	ShutdownTimeout   = 5 * time.Second
)

// Serve serves h on ln, over TLS with tlsConfig when it is set, until ctx
// ends, then shuts down gracefully. The server's own errors are logged to
// log as warnings.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, tlsConfig *tls.Config, log *slog.Logger) error {
	srv := &http.Server{Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			done <- srv.ServeTLS(ln, "", "")
			return
		}
		done <- srv.Serve(ln)
	}()
	select {
	case err := <-done:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", serr)
	}
	return err
}
