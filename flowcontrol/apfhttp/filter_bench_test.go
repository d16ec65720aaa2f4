package apfhttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/utils/clock"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apf/apftest"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/flowcontrol/eventclock"
	"github.com/pace-platform/pace/internal/auth"
)

// BenchmarkAdmission is the gate's own work on one GET of a named object, as
// the proxy admits it: resolve, classify, dispatch, finish, headers.
func BenchmarkAdmission(b *testing.B) {
	g, _ := apftest.NewGate(b, eventclock.Real{WithDelayedExecution: clock.RealClock{}}, apf.Config{MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200}, "")
	h := apfhttp.Middleware(g, apfhttp.KubeResolver)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	u := auth.User{Name: "alice", Groups: []string{"team-a", auth.Authenticated}}
	r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps/x", nil)
	r = r.WithContext(auth.WithUser(r.Context(), u))
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
