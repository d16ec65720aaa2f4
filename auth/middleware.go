package auth

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// Middleware authenticates every request with a and stores the caller in the
// request's context (see FromContext). A request without credentials, or
// any request when a is nil, proceeds as AnonymousUser; invalid credentials
// are refused with 401 and the API's error envelope (schemas.APIError), and
// a *ThrottledError with 429 and Retry-After.
// Authorization is left to the handlers.
func Middleware(a Authenticator) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := AnonymousUser()
			if a != nil {
				got, ok, err := a.Authenticate(r)
				if err != nil {
					e := &schemas.APIError{Code: http.StatusUnauthorized, Name: "UNAUTHORIZED", Message: err.Error()}
					var throttled *ThrottledError
					if errors.As(err, &throttled) {
						e.Code, e.Name = http.StatusTooManyRequests, "TOO_MANY_REQUESTS"
						w.Header().Set("Retry-After", retryAfter(throttled.RetryAfter))
					} else {
						w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(e.Code)
					_ = json.NewEncoder(w).Encode(e)
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
