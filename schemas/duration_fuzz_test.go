package schemas_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pace-platform/pace/schemas"
)

// FuzzDuration checks that every duration Pace reads (a Go duration string
// or a number of seconds) is written back as a string that reads the same,
// and that a number of seconds keeps its sign and is not read as zero
// unless it is zero.
func FuzzDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var d schemas.Duration
		if json.Unmarshal(data, &d) != nil {
			return
		}
		var seconds float64
		if json.Unmarshal(data, &seconds) == nil && (seconds < 0) != (d < 0) && d != 0 {
			t.Fatalf("%s seconds read as %v: the sign changed", data, d.D())
		}
		notZero(t, data, d == 0)
		roundTrip(t, data, d, func(a, b schemas.Duration) bool { return a == b })
	})
}

// FuzzDeadline checks the same of deadlines: durations, seconds and
// RFC 3339 times.
func FuzzDeadline(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var d schemas.Deadline
		if json.Unmarshal(data, &d) != nil {
			return
		}
		if !d.At.IsZero() && d.After != 0 {
			t.Fatalf("%s: both a time and a duration: %+v", data, d)
		}
		notZero(t, data, d.IsZero())
		roundTrip(t, data, d, func(a, b schemas.Deadline) bool { return a.After == b.After && a.At.Equal(b.At) })
	})
}

// notZero fails t when a number of seconds or a duration string other than
// zero was read as zero, which fields take to mean their default.
func notZero(t *testing.T, data []byte, zero bool) {
	t.Helper()
	var seconds float64
	var text string
	switch {
	case !zero:
	case json.Unmarshal(data, &seconds) == nil && seconds != 0,
		json.Unmarshal(data, &text) == nil && strings.ContainsAny(text, "123456789"):
		t.Fatalf("%s read as zero, which fields take for their default", data)
	}
}

// roundTrip fails t unless v, read from data, is written as JSON that reads
// back equal to v and is written again unchanged.
func roundTrip[T any](t *testing.T, data []byte, v T, equal func(a, b T) bool) {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s read as %+v, which does not encode: %v", data, v, err)
	}
	var back T
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("%s read as %+v, written as %s, which does not read: %v", data, v, out, err)
	}
	if !equal(v, back) {
		t.Fatalf("%s read as %+v, written as %s, read back as %+v", data, v, out, back)
	}
	if again, _ := json.Marshal(back); !bytes.Equal(again, out) {
		t.Fatalf("%s written as %s, then as %s", data, out, again)
	}
}
