package auth

import (
	"context"
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

// Defaults of TokenReview. An accepted token's answer is reused for
// DefaultTokenReviewTTL, as kube-apiserver caches its token webhook's
// (--authentication-token-webhook-cache-ttl); a refusal for the shorter
// DefaultTokenReviewNegativeTTL, so that a token refused while the cluster
// catches up (a service account just created, an issuer's keys rotating)
// is not refused for long. A review takes at most DefaultTokenReviewTimeout.
const (
	DefaultTokenReviewTTL         = 10 * time.Second
	DefaultTokenReviewNegativeTTL = 3 * time.Second
	DefaultTokenReviewTimeout     = 10 * time.Second
)

// TokenReview authenticates bearer tokens with the cluster's TokenReview API
// (service-account tokens, OIDC, the cluster's own token file: whatever its
// authenticators accept).
//
// A token is reviewed once however many requests carry it at the same
// time: the others wait for the one review (each as long as its own
// context allows). An answer is reused for TTL when the token is accepted,
// for NegativeTTL when refused; a review that fails (the cluster
// unreachable) is an error and is not kept.
//
// Reviews of tokens not in the cache are charged to the client address
// that sent them (Failures): a review the cluster accepts is refunded, so
// only refused tokens spend an address's budget, and an address that has
// spent it is refused at once with a *ThrottledError until it refills,
// without a review. One address's flood of made-up tokens thus costs the
// cluster a bounded rate of reviews and cannot delay other addresses'
// (whose reviews share the client's rate limit).
//
// A TokenReview is safe for concurrent use; its fields must not change
// once it is in use.
type TokenReview struct {
	Reviews authenticationclient.TokenReviewInterface
	// TTL (default DefaultTokenReviewTTL) and NegativeTTL (default
	// DefaultTokenReviewNegativeTTL, at most TTL) keep answers.
	TTL, NegativeTTL time.Duration
	// Timeout bounds a review (default DefaultTokenReviewTimeout); it runs
	// on even when the request that started it goes, for those waiting.
	Timeout time.Duration
	// Failures is each client address's budget of refused reviews
	// (default DefaultFailureBudget).
	Failures FailureBudget
	// Clock times the cache and the budgets; default the real clock.
	Clock clock.PassiveClock

	mu       sync.Mutex
	cache    answers[review]
	inflight map[[sha256.Size]byte]*reviewCall
	sources  sources
}

type review struct {
	user User
	ok   bool
}

// reviewCall is a review in progress; done is closed once res and err are
// set.
type reviewCall struct {
	done    chan struct{}
	res     review
	err     error
	waiters int // requests that joined it; guarded by the TokenReview's mu
}

// ErrTokenRefused is a bearer token the cluster did not authenticate.
var ErrTokenRefused = errors.New("the cluster did not authenticate the bearer token")

// Authenticate implements Authenticator. Its errors are ErrTokenRefused,
// a *ThrottledError, or a failed review.
func (t *TokenReview) Authenticate(r *http.Request) (User, bool, error) {
	token, ok := bearerToken(r)
	if !ok {
		return User{}, false, nil
	}
	now := t.clock().Now()
	key := sha256.Sum256([]byte(token))
	t.mu.Lock()
	if c, hit := t.cache.get(key, now); hit {
		t.mu.Unlock()
		return c.answer()
	}
	call, joined := t.inflight[key]
	if !joined {
		src := sourceOf(r)
		if wait, ok := t.sources.take(src, now, t.Failures.orDefault()); !ok {
			t.mu.Unlock()
			return User{}, true, &ThrottledError{Source: src, RetryAfter: wait}
		}
		call = &reviewCall{done: make(chan struct{})}
		if t.inflight == nil {
			t.inflight = map[[sha256.Size]byte]*reviewCall{}
		}
		t.inflight[key] = call
		t.mu.Unlock()
		// The review is everyone's who waits for it: it ends by its own
		// timeout, not with the request that started it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), t.timeout())
		call.res, call.err = t.review(ctx, token)
		cancel()
		t.settle(key, src, call)
	} else {
		call.waiters++
		t.mu.Unlock()
		select {
		case <-call.done:
		case <-r.Context().Done():
			return User{}, true, fmt.Errorf("token review: %w", r.Context().Err())
		}
	}
	if call.err != nil {
		return User{}, true, call.err
	}
	return call.res.answer()
}

// review asks the cluster about token.
func (t *TokenReview) review(ctx context.Context, token string) (review, error) {
	res, err := t.Reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return review{}, fmt.Errorf("token review: %w", err)
	}
	c := review{ok: res.Status.Authenticated}
	if !c.ok {
		return c, nil
	}
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
	return c, nil
}

// settle records call's outcome: the answer cached with its TTL, the
// source's charge refunded unless the cluster refused the token, and the
// waiting requests released.
func (t *TokenReview) settle(key [sha256.Size]byte, src string, call *reviewCall) {
	now := t.clock().Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.inflight, key)
	switch {
	case call.err != nil: // the cluster's failure, not the caller's
		t.sources.refund(src, now, t.Failures.orDefault())
	case call.res.ok:
		t.cache.put(key, call.res, now.Add(t.ttl()), now)
		t.sources.refund(src, now, t.Failures.orDefault())
	default:
		t.cache.put(key, call.res, now.Add(t.negativeTTL()), now)
	}
	close(call.done)
}

func (c review) answer() (User, bool, error) {
	if !c.ok {
		return User{}, true, ErrTokenRefused
	}
	return c.user, true, nil
}

func (t *TokenReview) clock() clock.PassiveClock {
	if t.Clock != nil {
		return t.Clock
	}
	return clock.RealClock{}
}

func (t *TokenReview) ttl() time.Duration {
	if t.TTL > 0 {
		return t.TTL
	}
	return DefaultTokenReviewTTL
}

func (t *TokenReview) negativeTTL() time.Duration {
	d := DefaultTokenReviewNegativeTTL
	if t.NegativeTTL > 0 {
		d = t.NegativeTTL
	}
	return min(d, t.ttl())
}

func (t *TokenReview) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTokenReviewTimeout
}
