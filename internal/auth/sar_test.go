package auth

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// accessReviews allows group "monitoring" on /metrics, counting reviews. A
// fake beside TestProxyMetricsByRBAC (cmd/pace), which asks a real
// kube-apiserver's RBAC.
type accessReviews struct{ calls int }

func (a *accessReviews) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	a.calls++
	s := sar.Spec
	ok := slices.Contains(s.Groups, "monitoring") && s.NonResourceAttributes.Path == "/metrics" && s.NonResourceAttributes.Verb == "get"
	return &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: ok}}, nil
}

// TestSubjectAccessReviewCaches: decisions are kept for their TTL per
// identity, verb and path; system:masters is allowed without a review.
func TestSubjectAccessReviewCaches(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rv := &accessReviews{}
	sar := &SubjectAccessReview{Reviews: rv, AuthorizedTTL: 10 * time.Second, UnauthorizedTTL: 2 * time.Second, Clock: clk}
	ctx := context.Background()
	prom := User{Name: "prom", Groups: []string{"monitoring", Authenticated}}
	bob := User{Name: "prom", Groups: []string{Authenticated}} // same name, other groups
	admin := User{Name: "root", Groups: []string{Masters}}
	for _, step := range []struct {
		after   time.Duration
		u       User
		path    string
		allowed bool
		reviews int
	}{
		{0, prom, "/metrics", true, 1},
		{0, bob, "/metrics", false, 1},
		{0, prom, "/debug/x", false, 1},
		{time.Second, prom, "/metrics", true, 0},
		{time.Second, bob, "/metrics", false, 0},
		{2 * time.Second, bob, "/metrics", false, 1},
		{9 * time.Second, prom, "/metrics", true, 0},
		{10 * time.Second, prom, "/metrics", true, 1},
		{10 * time.Second, admin, "/debug/x", true, 0},
	} {
		clk.SetTime(time.Unix(1000, 0).Add(step.after))
		before := rv.calls
		allowed, _, err := sar.Authorize(ctx, step.u, "get", step.path)
		if err != nil || allowed != step.allowed || rv.calls-before != step.reviews {
			t.Errorf("at %s, %v on %s: allowed %v (%v), %d reviews; want %v, %d", step.after, step.u.Groups, step.path,
				allowed, err, rv.calls-before, step.allowed, step.reviews)
		}
	}
}
