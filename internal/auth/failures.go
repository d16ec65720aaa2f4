package auth

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"time"
)

// FailureBudget is a token bucket of failed authentications per client
// address: Burst of them at once, refilled at PerSecond. A zero value
// means DefaultFailureBudget.
type FailureBudget struct {
	PerSecond float64
	Burst     int
}

// DefaultFailureBudget lets an address have 10 tokens refused at once and
// one more every second: ample for a person mistyping or a client with a
// stale token, and a small share of the review client's rate.
var DefaultFailureBudget = FailureBudget{PerSecond: 1, Burst: 10}

func (b FailureBudget) orDefault() FailureBudget {
	if b.PerSecond <= 0 || b.Burst <= 0 {
		return DefaultFailureBudget
	}
	return b
}

// ThrottledError is returned by TokenReview.Authenticate, without a review,
// while the caller's address has spent its FailureBudget; RetryAfter is
// when the next review will be allowed. Middleware answers it with 429 and
// Retry-After.
type ThrottledError struct {
	Source     string
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many refused bearer tokens from %s: retry after %s", e.Source, e.RetryAfter.Round(time.Millisecond))
}

// sourceOf is the client address of r, without its port.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// maxSources bounds the buckets kept: beyond it, full buckets (which mean
// the same as none) are dropped.
const maxSources = 16384

// sources are the failure buckets by client address: a missing one is
// full. The zero value is ready; its owner's mutex guards it.
type sources map[string]*bucket

// bucket holds tokens as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// level returns b's tokens at now.
func (b *bucket) level(now time.Time, budget FailureBudget) float64 {
	return math.Min(float64(budget.Burst), b.tokens+now.Sub(b.at).Seconds()*budget.PerSecond)
}

// take charges src one failure; when it has none left, it returns how long
// until it has one.
func (s *sources) take(src string, now time.Time, budget FailureBudget) (time.Duration, bool) {
	if *s == nil {
		*s = sources{}
	}
	b, ok := (*s)[src]
	if !ok {
		if len(*s) >= maxSources {
			s.dropFull(now, budget)
		}
		b = &bucket{tokens: float64(budget.Burst), at: now}
		(*s)[src] = b
	}
	level := b.level(now, budget)
	if level < 1 {
		return time.Duration((1 - level) / budget.PerSecond * float64(time.Second)), false
	}
	b.tokens, b.at = level-1, now
	return 0, true
}

// refund gives src back the failure take charged.
func (s sources) refund(src string, now time.Time, budget FailureBudget) {
	if b, ok := s[src]; ok {
		b.tokens, b.at = math.Min(float64(budget.Burst), b.level(now, budget)+1), now
	}
}

// dropFull forgets the buckets that have refilled.
func (s sources) dropFull(now time.Time, budget FailureBudget) {
	for src, b := range s {
		if b.level(now, budget) >= float64(budget.Burst) {
			delete(s, src)
		}
	}
}
