package apfhttp

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

func TestTallyList(t *testing.T) {
	gz := func(s string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		_ = zw.Close()
		return b.String()
	}
	for _, tc := range []struct {
		name, body string
		gzipped    bool
		want       listTally
	}{
		{"whole list", `{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[{"a":1},{"bb":22}]}`, false, listTally{ok: true, total: 2, items: 2, bytes: 7 + 9}},
		{"first page with remaining count", `{"metadata":{"continue":"x","remainingItemCount":40},"items":[{"a":1}]}`, false, listTally{ok: true, total: 41, items: 1, bytes: 7}},
		{"first page without remaining count", `{"metadata":{"continue":"x"},"items":[{"a":1}]}`, false, listTally{}},
		{"empty list", `{"items":[]}`, false, listTally{ok: true}},
		{"gzipped", gz(`{"items":[{"a":1}]}`), true, listTally{ok: true, total: 1, items: 1, bytes: 7}},
		{"a table", `{"kind":"Table","rows":[{"cells":[]}]}`, false, listTally{}},
		{"truncated", `{"items":[{"a":1},`, false, listTally{}},
		{"not an object", `[1,2]`, false, listTally{}},
	} {
		if got := tallyList(strings.NewReader(tc.body), tc.gzipped); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
