package auth_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/internal/auth"
)

// reviews answers TokenReviews from a map of tokens, counting them. A fake
// beside TestProxyAuthenticatesAsTheCluster (cmd/pace), which reviews tokens
// with a real kube-apiserver.
type reviews struct {
	users map[string]authenticationv1.UserInfo
	calls int
}

func (r *reviews) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	r.calls++
	u, ok := r.users[tr.Spec.Token]
	return &authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Authenticated: ok, User: u}}, nil
}

// TestChainOffersUnknownTokensFurther: a token the token file does not know
// is reviewed by the cluster; a token neither knows is refused with both
// reasons; a request without credentials is nobody's.
func TestChainOffersUnknownTokensFurther(t *testing.T) {
	tf, err := auth.ParseTokens(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rv := &reviews{users: map[string]authenticationv1.UserInfo{
		"sa-token": {Username: "system:serviceaccount:ns:robot", UID: "u1", Groups: []string{"system:serviceaccounts"}},
	}}
	chain := auth.Chain(tf, &auth.TokenReview{Reviews: rv, TTL: 10 * time.Second, Clock: clk})
	authenticate := func(token string) (auth.User, bool, error) {
		r := httptest.NewRequest("GET", "/", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return chain.Authenticate(r)
	}
	if u, ok, err := authenticate("s3cret"); !ok || err != nil || u.Name != "alice" || rv.calls != 0 {
		t.Errorf("token file's token: %+v %v %v, %d reviews", u, ok, err, rv.calls)
	}
	u, ok, err := authenticate("sa-token")
	want := auth.User{Name: "system:serviceaccount:ns:robot", UID: "u1", Groups: []string{"system:serviceaccounts", auth.Authenticated}}
	if diff := cmp.Diff(want, u); !ok || err != nil || diff != "" {
		t.Errorf("reviewed token: %v %v (-want +got):\n%s", ok, err, diff)
	}
	if _, ok, err := authenticate("nobody"); !ok || !errors.Is(err, auth.ErrInvalidToken) || !errors.Is(err, auth.ErrTokenRefused) {
		t.Errorf("unknown token: ok %v, err %v; want both refusals", ok, err)
	}
	if _, ok, err := authenticate(""); ok || err != nil {
		t.Errorf("no credentials: ok %v, err %v; want neither", ok, err)
	}

	// Answers, refusals included, are reused for the TTL, then asked again.
	calls := rv.calls
	_, _, _ = authenticate("sa-token")
	_, _, _ = authenticate("nobody")
	if rv.calls != calls {
		t.Errorf("%d reviews within the TTL, want none", rv.calls-calls)
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	_, _, _ = authenticate("sa-token")
	if rv.calls != calls+1 {
		t.Errorf("%d reviews after the TTL, want 1", rv.calls-calls)
	}
}
