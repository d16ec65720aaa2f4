package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

// TestAnswersExpireAndStayBounded: an answer is given until it expires; a
// full cache makes room by dropping expired answers, and keeps no new one
// while none has expired.
func TestAnswersExpireAndStayBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	key := func(i int) [sha256.Size]byte {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		return sha256.Sum256(b[:])
	}
	var a answers[int]
	a.put(key(0), 7, t0.Add(time.Second), t0)
	if v, ok := a.get(key(0), t0); !ok || v != 7 {
		t.Errorf("get before expiry = %d, %v; want 7", v, ok)
	}
	if _, ok := a.get(key(0), t0.Add(time.Second)); ok {
		t.Error("get at expiry: an answer, want none")
	}
	for i := 1; i < maxAnswers; i++ { // full: key(0) and maxAnswers-1 answers for a minute
		a.put(key(i), i, t0.Add(time.Minute), t0)
	}
	a.put(key(maxAnswers), -1, t0.Add(time.Minute), t0)
	if _, ok := a.get(key(maxAnswers), t0); ok || len(a.m) != maxAnswers {
		t.Errorf("full, none expired: the new answer kept (%d answers), want it refused", len(a.m))
	}
	later := t0.Add(2 * time.Second) // key(0) has expired
	a.put(key(maxAnswers), -1, later.Add(time.Minute), later)
	if v, ok := a.get(key(maxAnswers), later); !ok || v != -1 || len(a.m) != maxAnswers {
		t.Errorf("full, one expired: get = %d, %v with %d answers; want the new one in the expired one's place", v, ok, len(a.m))
	}
}
