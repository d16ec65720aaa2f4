package main

import "testing"

// Structured lines, as Pace's workers log them, read as level, message and
// fields; anything else is printed as written.
func TestLogLinesAreReadable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ line, want string }{
		{`{"time":"2026-12-06T07:00:00Z","level":"INFO","msg":"item stderr","job":"j1","item":"000002","line":"warn: low disk"}`,
			`INFO item stderr item=000002 job=j1 line="warn: low disk"`},
		{`{"time":"2026-12-06T07:00:00Z","level":"WARN","msg":"item timed out","timeout":"2s","delivery":2}`,
			`WARN item timed out delivery=2 timeout=2s`},
		{`plain text from a command`, `plain text from a command`},
		{`{"not":"a log record"}`, `{"not":"a log record"}`},
		{`{broken`, `{broken`},
	} {
		if got := readable(tc.line); got != tc.want {
			t.Errorf("readable(%s) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
