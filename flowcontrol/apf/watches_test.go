package apf

import (
	"testing"

	"github.com/pace-platform/pace/flowcontrol/work"
)

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
