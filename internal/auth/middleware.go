package auth

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// ErrorWriter answers a request refused with code (401, 403, 429, ...) and
// msg, in the API's own format; headers such as Retry-After and
// WWW-Authenticate are set before it is called. The default writes the
// error envelope of Pace's API (schemas.APIError); `pace gate proxy`
// writes kube-apiserver's Status objects.
type ErrorWriter func(w http.ResponseWriter, code int, msg string)

// WriteAPIError is the default ErrorWriter: schemas.APIError as JSON.
func WriteAPIError(w http.ResponseWriter, code int, msg string) {
	name := strings.ToUpper(strings.ReplaceAll(http.StatusText(code), " ", "_"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&schemas.APIError{Code: code, Name: name, Message: msg})
}

// Option tunes Middleware and Require.
type Option func(*options)

type options struct {
	errors ErrorWriter
}

func newOptions(opts []Option) options {
	o := options{errors: WriteAPIError}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithErrorWriter answers refusals with ew instead of WriteAPIError.
func WithErrorWriter(ew ErrorWriter) Option {
	return func(o *options) {
		if ew != nil {
			o.errors = ew
		}
	}
}

// Middleware authenticates every request with a and stores the caller in the
// request's context (see FromContext). A request without credentials, or
// any request when a is nil, proceeds as AnonymousUser; invalid credentials
// are refused with 401 and WWW-Authenticate, and a *ThrottledError with 429
// and Retry-After, written by the ErrorWriter (default WriteAPIError).
// Authorization is left to the handlers.
func Middleware(a Authenticator, opts ...Option) func(http.Handler) http.Handler {
	o := newOptions(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := AnonymousUser()
			if a != nil {
				got, ok, err := a.Authenticate(r)
				if err != nil {
					code := http.StatusUnauthorized
					var throttled *ThrottledError
					if errors.As(err, &throttled) {
						code = http.StatusTooManyRequests
						w.Header().Set("Retry-After", retryAfter(throttled.RetryAfter))
					} else {
						w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
					}
					o.errors(w, code, err.Error())
					return
				}
				if ok {
					u = got
				}
			}
			next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), u)))
		})
	}
}

// retryAfter is d in whole seconds, at least 1, for a Retry-After header.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
