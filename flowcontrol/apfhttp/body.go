package apfhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/pace-platform/pace/internal/auth"
)

// BodyLimits bound what ReadBody reads before a request is admitted.
type BodyLimits struct {
	// MaxBytes is the largest body read: a larger one is refused with 413.
	MaxBytes int64
	// Timeout is how long the whole body may take to arrive, from the
	// moment its headers are read: later, the request is refused with 408
	// and its connection closed.
	Timeout time.Duration
	// MaxAnonymous bounds the bodies of anonymous callers (no credentials)
	// being read at once; beyond it they are refused with 429 before their
	// body is read. 0: no bound (an API without authentication, where
	// every caller is anonymous).
	MaxAnonymous int
	// Errors writes the refusals; nil means Pace's JSON envelope.
	Errors auth.ErrorWriter
}

// AnonymousBodies is the MaxAnonymous of Pace's servers when callers
// authenticate.
const AnonymousBodies = 16

// ReadBody returns a middleware that reads a request's whole body into
// memory, within l, before calling next, which sees it as an in-memory
// reader. Put it between authentication and the APF filter,
//
//	auth.Middleware(authn)(apf.ReadBody(limits)(gate.Middleware(resolve)(mux)))
//
// so that credentials are checked before any body is read, and no seat is
// ever held waiting for a slow client: a request is admitted only once its
// body is in. A body that is not in within l.Timeout is answered
// 408 Request Timeout, a larger one than l.MaxBytes 413 (before reading it
// when its Content-Length says so), and the connection is closed, so a
// client sending a few bytes a minute holds no seat, only its connection
// for l.Timeout. Requests without a body pass at once.
//
// The deadline is set on the connection (http.ResponseController) and
// cleared once the body is in: a response may stream for as long as it
// likes. Behind a ResponseWriter with no deadlines (a test recorder) the
// body is read without one.
func ReadBody(l BodyLimits) func(http.Handler) http.Handler {
	var anonymous atomic.Int64 // anonymous bodies being read
	refuse := errorWriter(l.Errors)
	refuseBody := func(w http.ResponseWriter, code int, msg string) {
		endReading(w) // what is left of the body is not worth reading
		refuse(w, code, msg)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > l.MaxBytes {
				refuseBody(w, http.StatusRequestEntityTooLarge,
					fmt.Sprintf("request body of %d bytes larger than %d bytes", r.ContentLength, l.MaxBytes))
				return
			}
			if l.MaxAnonymous > 0 {
				if u, ok := auth.FromContext(r.Context()); !ok || u.IsAnonymous() {
					if n := anonymous.Add(1); n > int64(l.MaxAnonymous) {
						anonymous.Add(-1)
						endReading(w)
						tooManyRequests(w, refuse, 1, fmt.Sprintf("%d request bodies without credentials are being read: send a bearer token, or try again later", l.MaxAnonymous))
						return
					}
					defer anonymous.Add(-1)
				}
			}
			data, err := readBody(w, r, l)
			var mbe *http.MaxBytesError
			switch {
			case err == nil:
			case errors.As(err, &mbe):
				refuseBody(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", mbe.Limit))
				return
			case timedOut(err):
				refuseBody(w, http.StatusRequestTimeout, fmt.Sprintf("request body not received within %s", l.Timeout))
				return
			default:
				refuseBody(w, http.StatusBadRequest, "request body: "+err.Error())
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			r.ContentLength = int64(len(data))
			r.TransferEncoding = nil
			next.ServeHTTP(w, r)
		})
	}
}

// readBody reads r's body within l, the connection's read deadline set for
// the time of the read only.
func readBody(w http.ResponseWriter, r *http.Request, l BodyLimits) ([]byte, error) {
	rc := http.NewResponseController(w)
	if l.Timeout > 0 {
		// A network deadline is wall-clock time by nature; no clock to inject.
		if err := rc.SetReadDeadline(time.Now().Add(l.Timeout)); err == nil {
			// Cleared once the body is in (net/http clears it too when an
			// HTTP/1 body ends), so that it cannot cut a response short.
			defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
		}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, l.MaxBytes))
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// endReading closes the connection after the response, without waiting for
// the rest of the body: net/http would otherwise read what is left of it
// (up to 256 KiB) to reuse the connection, without a deadline, and a
// client that stopped sending would keep the connection, and a graceful
// shutdown, waiting.
func endReading(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
