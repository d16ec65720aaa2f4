package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// Defaults of SubjectAccessReview: kube's delegated authorizer's
// (--authorization-webhook-cache-authorized-ttl and -unauthorized-ttl).
const (
	DefaultAuthorizedTTL   = 10 * time.Second
	DefaultUnauthorizedTTL = 10 * time.Second
)

// SubjectAccessReview authorizes requests for non-resource URLs (a
// server's own /metrics, debug endpoints) by asking the cluster, as
// kube's delegated authorizer does (--authorization-kubeconfig): whatever
// RBAC (or any authorizer of the cluster) allows the caller on the path
// with the request's verb. Members of system:masters are allowed without
// asking. Decisions are kept for AuthorizedTTL or UnauthorizedTTL (kube's
// defaults when zero); a review that fails is an error, not kept.
//
// A SubjectAccessReview is safe for concurrent use; its fields must not
// change once it is in use.
type SubjectAccessReview struct {
	Reviews                        authorizationclient.SubjectAccessReviewInterface
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// Clock times the cache; default the real clock.
	Clock clock.PassiveClock

	mu    sync.Mutex
	cache answers[decision]
}

type decision struct {
	allowed bool
	reason  string
}

// Authorize reports whether u may verb (get, post, ...) the non-resource
// path, and the cluster's reason when it may not.
func (s *SubjectAccessReview) Authorize(ctx context.Context, u User, verb, path string) (bool, string, error) {
	if u.InGroup(Masters) {
		return true, "", nil
	}
	now := s.clock().Now()
	key := decisionKey(u, verb, path)
	s.mu.Lock()
	d, hit := s.cache.get(key, now)
	s.mu.Unlock()
	if hit {
		return d.allowed, d.reason, nil
	}
	res, err := s.Reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extraOf(u),
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	d = decision{allowed: res.Status.Allowed && !res.Status.Denied, reason: res.Status.Reason}
	ttl := s.ttl(s.AuthorizedTTL, DefaultAuthorizedTTL)
	if !d.allowed {
		ttl = s.ttl(s.UnauthorizedTTL, DefaultUnauthorizedTTL)
	}
	now = s.clock().Now()
	s.mu.Lock()
	s.cache.put(key, d, now.Add(ttl), now)
	s.mu.Unlock()
	return d.allowed, d.reason, nil
}

// Middleware returns a middleware letting through the requests whose caller
// (from Middleware, which must run first) the cluster allows on the
// request's path, with the verb kube derives from the method (get, post,
// put, patch, delete, head→get); others are refused with 403 (as
// kube-apiserver, anonymous callers too), a failed review with 500, written
// by the options' ErrorWriter.
func (s *SubjectAccessReview) Middleware(opts ...Option) func(http.Handler) http.Handler {
	o := newOptions(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, ok := FromContext(r.Context())
			if !ok {
				u = AnonymousUser()
			}
			verb := nonResourceVerb(r.Method)
			allowed, reason, err := s.Authorize(r.Context(), u, verb, r.URL.Path)
			switch {
			case err != nil:
				o.errors(w, http.StatusInternalServerError, err.Error())
			case !allowed:
				msg := fmt.Sprintf("forbidden: User %q cannot %s path %q", u.Name, verb, r.URL.Path)
				if reason != "" {
					msg += ": " + reason
				}
				o.errors(w, http.StatusForbidden, msg)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// nonResourceVerb is kube's verb of a request for a non-resource URL.
func nonResourceVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "unknown"
}

func extraOf(u User) map[string]authorizationv1.ExtraValue {
	if len(u.Extra) == 0 {
		return nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	return extra
}

// decisionKey identifies a decision: the whole identity, the verb and the
// path.
func decisionKey(u User, verb, path string) [sha256.Size]byte {
	groups := slices.Clone(u.Groups)
	slices.Sort(groups)
	b, _ := json.Marshal(struct { // maps marshal with sorted keys
		User       User
		Groups     []string
		Verb, Path string
	}{User{Name: u.Name, UID: u.UID, Extra: u.Extra}, groups, verb, path})
	return sha256.Sum256(b)
}

func (s *SubjectAccessReview) clock() clock.PassiveClock {
	if s.Clock != nil {
		return s.Clock
	}
	return clock.RealClock{}
}

func (s *SubjectAccessReview) ttl(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
