// Package auth identifies the callers of Pace's HTTP APIs.
//
// Identities follow Kubernetes conventions, so that API Priority and Fairness
// classifies Pace's callers exactly as kube-apiserver classifies its own,
// from the same credentials kube-apiserver takes (Chain tries them in its
// order): identity headers from a verified front proxy (RequestHeader), a
// client certificate verified against a CA (ClientCert: common name and
// organizations), a bearer token from a static token file (kube-apiserver's
// --token-auth-file format: user, uid, groups) or verified by the cluster
// (TokenReview). Every authenticated user is also in system:authenticated; a
// caller without credentials is system:anonymous in system:unauthenticated.
package auth

import (
	"context"
	"net/http"
	"slices"
	"strings"
)

// Well-known user and group names.
const (
	Anonymous       = "system:anonymous"
	Unauthenticated = "system:unauthenticated"
	Authenticated   = "system:authenticated"
	// Masters and Admins may see and change every user's jobs.
	Masters = "system:masters"
	Admins  = "pace:admins"
)

// User is an authenticated (or anonymous) caller. Extra holds what some
// authenticators add (a TokenReview's, a front proxy's X-Remote-Extra-*).
type User struct {
	Name   string              `json:"name"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
}

// AnonymousUser is the identity of a request without credentials.
func AnonymousUser() User { return User{Name: Anonymous, Groups: []string{Unauthenticated}} }

// IsAnonymous reports whether u carries no credentials.
func (u User) IsAnonymous() bool { return u.Name == Anonymous }

// InGroup reports whether u is a member of group.
func (u User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

// IsAdmin reports whether u may act on every user's resources.
func (u User) IsAdmin() bool { return u.InGroup(Admins) || u.InGroup(Masters) }

// Owns reports whether u may see and change what owner owns: owner and the
// admins may.
func (u User) Owns(owner string) bool { return u.IsAdmin() || u.Name == owner }

// Authenticator identifies the caller of an HTTP request.
type Authenticator interface {
	// Authenticate returns the caller; ok is false when the request carries
	// no credentials this authenticator understands. An error means the
	// credentials are present but invalid.
	Authenticate(r *http.Request) (u User, ok bool, err error)
}

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// FromContext returns the user stored by WithUser or Middleware, and whether
// there was one.
func FromContext(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// bearerToken returns the token of an "Authorization: Bearer …" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
