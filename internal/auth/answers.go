package auth

import (
	"crypto/sha256"
	"time"
)

// maxAnswers bounds a cache of the cluster's answers (TokenReview,
// SubjectAccessReview): beyond it, answers are not kept, so that a flood of
// made-up questions costs reviews, not memory.
const maxAnswers = 4096

// answers keeps the cluster's answers by the hash of the question, each
// until it expires. It is not safe for concurrent use: its owner locks.
type answers[V any] struct {
	m map[[sha256.Size]byte]expiring[V]
}

type expiring[V any] struct {
	v       V
	expires time.Time
}

// get returns the answer to key while it has not expired at now.
func (a *answers[V]) get(key [sha256.Size]byte, now time.Time) (V, bool) {
	e, ok := a.m[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put keeps v as the answer to key until expires; when the cache is full,
// the answers expired at now go first, and v is not kept if none had.
func (a *answers[V]) put(key [sha256.Size]byte, v V, expires, now time.Time) {
	if a.m == nil {
		a.m = map[[sha256.Size]byte]expiring[V]{}
	}
	if len(a.m) >= maxAnswers {
		for k, old := range a.m {
			if !now.Before(old.expires) {
				delete(a.m, k)
			}
		}
		if len(a.m) >= maxAnswers {
			return
		}
	}
	a.m[key] = expiring[V]{v, expires}
}
