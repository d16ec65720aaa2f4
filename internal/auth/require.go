package auth

import (
	"net/http"
	"strings"
)

// MetricsReaders may read /metrics, and nothing more than any other
// authenticated user: the group to give Prometheus' token.
const MetricsReaders = "pace:metrics"

// Who may read what only admins should see once callers authenticate: the
// APF dumps (every flow's user), and /metrics (every tenant's jobs), which
// Prometheus reads with a token of group MetricsReaders.
var (
	ReadDumps   = []string{Admins, Masters}
	ReadMetrics = []string{Admins, Masters, MetricsReaders}
)

// Require returns a middleware that lets through only callers in one of
// groups (put there by Middleware, which must run first): a caller without
// credentials is refused with 401, any other with 403, in the API's error
// envelope (schemas.APIError). Serve it only behind an Authenticator: with
// none, every caller is anonymous and refused. RequireWith writes the
// refusals with its options' ErrorWriter.
//
//	mux.Handle("GET /metrics", auth.Require(auth.Admins, auth.Masters, auth.MetricsReaders)(metrics))
func Require(groups ...string) func(http.Handler) http.Handler { return RequireWith(nil, groups...) }

// RequireWith is Require with options.
func RequireWith(opts []Option, groups ...string) func(http.Handler) http.Handler {
	o := newOptions(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, ok := FromContext(r.Context())
			if !ok {
				u = AnonymousUser()
			}
			for _, g := range groups {
				if u.InGroup(g) {
					next.ServeHTTP(w, r)
					return
				}
			}
			if u.IsAnonymous() {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pace"`)
				o.errors(w, http.StatusUnauthorized, "a bearer token is needed to read "+r.URL.Path)
				return
			}
			o.errors(w, http.StatusForbidden, "only members of "+strings.Join(groups, ", ")+" may read "+r.URL.Path)
		})
	}
}
