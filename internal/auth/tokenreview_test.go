package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// blockingReviews accepts the tokens "good*", each review waiting for
// release to close. A fake beside TestProxyContainsBadTokenFloods
// (cmd/pace), which floods a real kube-apiserver's TokenReview.
type blockingReviews struct {
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockingReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	b.calls.Add(1)
	if b.release != nil {
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ok := len(tr.Spec.Token) >= 4 && tr.Spec.Token[:4] == "good"
	return &authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Authenticated: ok,
		User: authenticationv1.UserInfo{Username: tr.Spec.Token}}}, nil
}

func authenticate(ctx context.Context, tr *TokenReview, from, token string) (User, error) {
	r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	r.RemoteAddr = from + ":40000"
	r.Header.Set("Authorization", "Bearer "+token)
	u, _, err := tr.Authenticate(r)
	return u, err
}

// TestTokenReviewCoalesces: requests carrying one token while it is being
// reviewed wait for that review, even when the request that started it
// goes away.
func TestTokenReviewCoalesces(t *testing.T) {
	rv := &blockingReviews{release: make(chan struct{})}
	tr := &TokenReview{Reviews: rv, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))}
	leaderCtx, leaderGone := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() { _, err := authenticate(leaderCtx, tr, "10.0.0.1", "good-alice"); leader <- err }()
	waitFor(t, func() bool { return rv.calls.Load() == 1 })
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			u, err := authenticate(context.Background(), tr, fmt.Sprintf("10.0.1.%d", i), "good-alice")
			if err == nil && u.Name != "good-alice" {
				err = fmt.Errorf("user %q", u.Name)
			}
			errs <- err
		})
	}
	key := sha256.Sum256([]byte("good-alice"))
	waitFor(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.inflight[key] != nil && tr.inflight[key].waiters == n
	})
	leaderGone() // the review runs on for those waiting
	close(rv.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if err := <-leader; err != nil {
		t.Errorf("leader: %v", err)
	}
	if got := rv.calls.Load(); got != 1 {
		t.Errorf("%d reviews of one token, want 1", got)
	}
}

// TestTokenReviewTTLs: an accepted token is reused for TTL, a refused one
// for the shorter NegativeTTL; a failed review is not kept.
func TestTokenReviewTTLs(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rv := &blockingReviews{}
	tr := &TokenReview{Reviews: rv, TTL: 10 * time.Second, NegativeTTL: 2 * time.Second, Clock: clk}
	ctx := context.Background()
	ask := func(token string) int32 {
		before := rv.calls.Load()
		_, _ = authenticate(ctx, tr, "10.0.0.1", token)
		return rv.calls.Load() - before
	}
	for _, step := range []struct {
		after       time.Duration
		good, bad   int32 // reviews of good-x and of bad-x
		description string
	}{
		{0, 1, 1, "first sight"},
		{time.Second, 0, 0, "both cached"},
		{2 * time.Second, 0, 1, "refusal expired at 2s"},
		{3 * time.Second, 0, 0, "refusal cached again"},
		{9 * time.Second, 0, 1, "acceptance kept until 10s, refusal expired at 4s"},
		{10 * time.Second, 1, 0, "acceptance expired, refusal cached again"},
	} {
		clk.SetTime(time.Unix(1000, 0).Add(step.after))
		if good, bad := ask("good-x"), ask("bad-x"); good != step.good || bad != step.bad {
			t.Errorf("%s (at %s): %d and %d reviews, want %d and %d", step.description, step.after, good, bad, step.good, step.bad)
		}
	}

	// A failed review is an error, not a refusal, and is asked again.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	rv.release = make(chan struct{}) // never released: the review times out
	tr.Timeout = time.Millisecond
	if _, err := authenticate(cctx, tr, "10.0.0.1", "good-y"); err == nil || errors.Is(err, ErrTokenRefused) {
		t.Errorf("failed review: %v, want an error other than a refusal", err)
	}
	close(rv.release)
	if u, err := authenticate(ctx, tr, "10.0.0.1", "good-y"); err != nil || u.Name != "good-y" {
		t.Errorf("after a failed review: %v %v, want asked again and accepted", u, err)
	}
}

// TestTokenReviewChargesFailuresToTheirSource: an address spends its
// budget on refused tokens only, and is then refused without reviews until
// it refills; other addresses are not affected.
func TestTokenReviewChargesFailuresToTheirSource(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rv := &blockingReviews{}
	tr := &TokenReview{Reviews: rv, Failures: FailureBudget{PerSecond: 0.5, Burst: 3}, Clock: clk}
	ctx := context.Background()
	for i := range 3 {
		if _, err := authenticate(ctx, tr, "10.0.0.66", fmt.Sprintf("bad-%d", i)); !errors.Is(err, ErrTokenRefused) {
			t.Fatalf("bad token %d: %v, want refused by the cluster", i, err)
		}
	}
	calls := rv.calls.Load()
	_, err := authenticate(ctx, tr, "10.0.0.66", "bad-3")
	var throttled *ThrottledError
	if !errors.As(err, &throttled) || throttled.RetryAfter != 2*time.Second || throttled.Source != "10.0.0.66" {
		t.Fatalf("fourth bad token: %v, want throttled for 2s", err)
	}
	// Throttled before the review: even a good token from the address.
	if _, err := authenticate(ctx, tr, "10.0.0.66", "good-from-flooder"); !errors.As(err, &throttled) {
		t.Errorf("good token from the throttled address: %v, want throttled", err)
	}
	if got := rv.calls.Load(); got != calls {
		t.Errorf("%d reviews while throttled, want none", got-calls)
	}
	// Another address: its own budget, and accepted tokens cost nothing.
	for i := range 10 {
		if u, err := authenticate(ctx, tr, "10.0.0.7", fmt.Sprintf("good-%d", i)); err != nil || u.Name != fmt.Sprintf("good-%d", i) {
			t.Fatalf("other address, good token %d: %v %v", i, u, err)
		}
	}
	for i := range 3 {
		if _, err := authenticate(ctx, tr, "10.0.0.7", fmt.Sprintf("typo-%d", i)); !errors.Is(err, ErrTokenRefused) {
			t.Errorf("other address, bad token %d: %v, want reviewed and refused", i, err)
		}
	}
	// Cached answers are free, throttled or not.
	if _, err := authenticate(ctx, tr, "10.0.0.66", "bad-0"); !errors.Is(err, ErrTokenRefused) {
		t.Errorf("cached refusal: %v", err)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second)) // one failure refilled
	if _, err := authenticate(ctx, tr, "10.0.0.66", "bad-4"); !errors.Is(err, ErrTokenRefused) {
		t.Errorf("after refilling: %v, want reviewed", err)
	}
	if _, err := authenticate(ctx, tr, "10.0.0.66", "bad-5"); !errors.As(err, &throttled) {
		t.Errorf("after spending the refill: %v, want throttled", err)
	}
}

// waitFor polls cond until it holds (10 s at most).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}
