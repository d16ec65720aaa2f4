package targets

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Retries counts the failed attempts a runtime retried while executing one
// request, by cause ("throttled", "conflict", "server error", ...). The
// executor attaches one to each request's context and reports it in the
// request's outcome. It is safe for concurrent use.
type Retries struct {
	mu      sync.Mutex
	byCause map[string]int // guarded by mu
}

type retriesKey struct{}

// WithRetries returns a context carrying a new, empty Retries.
func WithRetries(ctx context.Context) (context.Context, *Retries) {
	r := &Retries{byCause: map[string]int{}}
	return context.WithValue(ctx, retriesKey{}, r), r
}

// NoteRetry records a retried attempt in the Retries of ctx; a context
// without one (a runtime called outside the executor) ignores it.
func NoteRetry(ctx context.Context, cause string) {
	r, ok := ctx.Value(retriesKey{}).(*Retries)
	if !ok {
		return
	}
	r.mu.Lock()
	r.byCause[cause]++
	r.mu.Unlock()
}

// Total is the number of retried attempts.
func (r *Retries) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.byCause {
		n += c
	}
	return n
}

// String describes the retries for an outcome's reason, e.g.
// "3 retries (conflict 1, server error 2)"; "" when there were none.
func (r *Retries) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byCause) == 0 {
		return ""
	}
	n, parts := 0, make([]string, 0, len(r.byCause))
	for _, cause := range slices.Sorted(maps.Keys(r.byCause)) {
		n += r.byCause[cause]
		parts = append(parts, fmt.Sprintf("%s %d", cause, r.byCause[cause]))
	}
	word := "retries"
	if n == 1 {
		word = "retry"
	}
	return fmt.Sprintf("%d %s (%s)", n, word, strings.Join(parts, ", "))
}
