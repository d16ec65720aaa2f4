package auth

import (
	"encoding/json"
	"net/http"

	"github.com/pace-platform/pace/schemas"
)

// Middleware authenticates every request with a and stores the caller in the
// request's context (see FromContext). A request without credentials, or
// any request when a is nil, proceeds as AnonymousUser; invalid credentials
// are refused with 401 and the API's error envelope (schemas.APIError).
// Authorization is left to the handlers.
func Middleware(a Authenticator) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := AnonymousUser()
			if a != nil {
				got, ok, err := a.Authenticate(r)
				if err != nil {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
					w.WriteHeader(http.StatusUnauthorized)
					_ = json.NewEncoder(w).Encode(&schemas.APIError{
						Code: http.StatusUnauthorized, Name: "UNAUTHORIZED", Message: err.Error()})
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
