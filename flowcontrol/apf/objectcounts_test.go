package apf

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/pace-platform/pace/flowcontrol/work"
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

// TestWatchTracker checks which writes a watch is counted for, as kube's
// watch tracker counts them.
func TestWatchTracker(t *testing.T) {
	wt := NewWatchTracker()
	forgets := []func(){
		wt.Register(&work.Request{Verb: "watch", APIGroup: "apps", Resource: "deployments"}),
		wt.Register(&work.Request{Verb: "watch", APIGroup: "apps", Resource: "deployments", Namespace: "a"}),
		wt.Register(&work.Request{Verb: "watch", APIGroup: "apps", Resource: "deployments", Namespace: "a", Name: "web"}),
		wt.Register(&work.Request{Verb: "watch", Resource: "pods", FieldSelector: "spec.nodeName=node-1"}), // a kubelet: not counted
		wt.Register(&work.Request{Verb: "watch", Resource: "pods", FieldSelector: "spec.nodeName="}),       // unscheduled pods: counted
		wt.Register(&work.Request{Verb: "list", Resource: "pods"}),                                         // not a watch
	}
	for _, tc := range []struct {
		r    work.Request
		want int
	}{
		{work.Request{Verb: "update", APIGroup: "apps", Resource: "deployments", Namespace: "a", Name: "web"}, 3},
		{work.Request{Verb: "update", APIGroup: "apps", Resource: "deployments", Namespace: "a", Name: "db"}, 2},
		{work.Request{Verb: "create", APIGroup: "apps", Resource: "deployments", Namespace: "b"}, 1},
		{work.Request{Verb: "get", APIGroup: "apps", Resource: "deployments", Namespace: "a", Name: "web"}, 0},
		{work.Request{Verb: "delete", Resource: "pods", Namespace: "a", Name: "p"}, 1},
		{work.Request{Verb: "delete", Resource: "deployments", Namespace: "a"}, 0}, // core group: another resource
	} {
		if got := wt.WatchCount(&tc.r); got != tc.want {
			t.Errorf("%+v: %d watches, want %d", tc.r, got, tc.want)
		}
	}
	for _, f := range forgets {
		f()
		f() // idempotent
	}
	if got := wt.WatchCount(&work.Request{Verb: "update", APIGroup: "apps", Resource: "deployments", Namespace: "a", Name: "web"}); got != 0 {
		t.Errorf("%d watches after all ended, want 0", got)
	}
}
