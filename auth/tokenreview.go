package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/clock"
)

// DefaultTokenReviewTTL is how long a TokenReview's answer is reused, as
// kube-apiserver caches its token webhook's (--authentication-token-webhook-cache-ttl).
const DefaultTokenReviewTTL = 10 * time.Second

// maxCachedReviews bounds the cache: beyond it, answers are not kept (a
// flood of made-up tokens costs reviews, not memory).
const maxCachedReviews = 4096

// TokenReview authenticates bearer tokens with the cluster's TokenReview API
// (service-account tokens, OIDC, the cluster's own token file: whatever its
// authenticators accept). Each answer, a user or a refusal, is reused for
// TTL (default DefaultTokenReviewTTL). A review that fails (the cluster
// unreachable) is an error and is not kept.
type TokenReview struct {
	Reviews authenticationclient.TokenReviewInterface
	TTL     time.Duration
	// Clock times the cache; default the real clock.
	Clock clock.PassiveClock

	mu    sync.Mutex
	cache map[[sha256.Size]byte]review
}

type review struct {
	user    User
	ok      bool
	expires time.Time
}

// ErrTokenRefused is a bearer token the cluster did not authenticate.
var ErrTokenRefused = errors.New("the cluster did not authenticate the bearer token")

// Authenticate implements Authenticator.
func (t *TokenReview) Authenticate(r *http.Request) (User, bool, error) {
	token, ok := bearerToken(r)
	if !ok {
		return User{}, false, nil
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if t.Clock != nil {
		clk = t.Clock
	}
	now := clk.Now
	key := sha256.Sum256([]byte(token))
	t.mu.Lock()
	c, hit := t.cache[key]
	t.mu.Unlock()
	if !hit || !now().Before(c.expires) {
		res, err := t.Reviews.Create(r.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return User{}, true, fmt.Errorf("token review: %w", err)
		}
		c = review{ok: res.Status.Authenticated, expires: now().Add(t.ttl())}
		if c.ok {
			u := res.Status.User
			c.user = User{Name: u.Username, UID: u.UID, Groups: u.Groups}
			if !c.user.InGroup(Authenticated) {
				c.user.Groups = append(c.user.Groups, Authenticated)
			}
			for k, v := range u.Extra {
				if c.user.Extra == nil {
					c.user.Extra = map[string][]string{}
				}
				c.user.Extra[k] = v
			}
		}
		t.keep(key, c, now())
	}
	if !c.ok {
		return User{}, true, ErrTokenRefused
	}
	return c.user, true, nil
}

func (t *TokenReview) ttl() time.Duration {
	if t.TTL > 0 {
		return t.TTL
	}
	return DefaultTokenReviewTTL
}

// keep caches c, dropping expired answers when the cache is full.
func (t *TokenReview) keep(key [sha256.Size]byte, c review, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cache == nil {
		t.cache = map[[sha256.Size]byte]review{}
	}
	if len(t.cache) >= maxCachedReviews {
		for k, old := range t.cache {
			if !now.Before(old.expires) {
				delete(t.cache, k)
			}
		}
		if len(t.cache) >= maxCachedReviews {
			return
		}
	}
	t.cache[key] = c
}
