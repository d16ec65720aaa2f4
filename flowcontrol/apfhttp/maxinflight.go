package apfhttp

import (
	"net/http"

	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/internal/auth"
)

// maxInflight is kube-apiserver's filter without APF: two non-blocking
// limits, one for read-only and one for mutating requests; long-running
// requests and system:masters are not limited; excess gets 429 with
// Retry-After 1. A zero limit means unlimited.
func maxInflight(cfg apf.Config, m *apf.Metrics, resolve Resolver, refuse auth.ErrorWriter) func(http.Handler) http.Handler {
	readOnly := newSemaphore(cfg.MaxRequestsInflight)
	mutating := newSemaphore(cfg.MaxMutatingRequestsInflight)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ri := resolve(r)
			if u, _ := auth.FromContext(r.Context()); ri.LongRunning || u.InGroup(auth.Masters) {
				next.ServeHTTP(w, r)
				return
			}
			sem := mutating
			if ri.IsReadOnly() {
				sem = readOnly
			}
			if !sem.tryAcquire() {
				terminated(m, r, ri, http.StatusTooManyRequests)
				tooManyRequests(w, refuse, 1, "too many requests, please try again later")
				return
			}
			defer sem.release()
			m.RequestKind(ri.IsReadOnly(), apf.Executing, 1)
			defer m.RequestKind(ri.IsReadOnly(), apf.Executing, -1)
			next.ServeHTTP(w, r)
		})
	}
}

type semaphore chan struct{}

func newSemaphore(n int) semaphore {
	if n <= 0 {
		return nil
	}
	return make(semaphore, n)
}

func (s semaphore) tryAcquire() bool {
	if s == nil {
		return true
	}
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s semaphore) release() {
	if s != nil {
		<-s
	}
}
